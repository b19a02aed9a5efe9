// MathJax 3 for pymdownx.arithmatex (generic mode), as the mkdocs-material docs recommend:
// arithmatex wraps inline math in \( \) and display math in \[ \] inside elements of class
// "arithmatex"; MathJax typesets only those, so a stray "$" or "\(" elsewhere is left alone.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex"
  }
};

// re-typeset after each page change of instant navigation (document$ is mkdocs-material's)
document$.subscribe(() => {
  MathJax.startup.output.clearCache()
  MathJax.typesetClear()
  MathJax.texReset()
  MathJax.typesetPromise()
})
