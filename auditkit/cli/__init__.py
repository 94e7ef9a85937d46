"""The ``auditkit`` command line, on click's public API.

``app`` assembles the commands into one group and holds the console script (``main``); each command lives in its
own module (``audit``, ``train``, ``distinguish``, ``canary``, ``attack``, ``account``, ``reproduce``, ``report``,
``mechanisms``). The options several commands share are in ``options``, the flags generated from the mechanisms'
parameter specs in ``mechanism_flags``, the click classes that hand generated options on and print help in panels in
``click_classes``; ``errors`` turns bad input into one line and exit status 2, ``terminal`` prints progress.
"""
