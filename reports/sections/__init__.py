"""What a report says, as plain-text strings, one module per section (in report order): ``intro``, ``findings``,
``glossary``, ``summary`` and its ``notes``, ``adaptive`` tests, ``identification``, ``canary``, ``figure_captions``,
``reconstructions``, ``details``, ``provenance``; a reproduction's report is ``reproduction``. ``text`` holds the
formatters they share. The markdown and HTML renderers lay these strings out.

Every string is unescaped text (labels, parameters and plugin names are user-supplied); the markdown renderer
escapes it for markdown, the HTML template autoescapes it.
"""
