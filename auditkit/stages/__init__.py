"""The audit's stages, one module each, in the order an audit runs them (``auditkit.audit`` orchestrates them,
stores each result as it finishes and resumes from what is stored):

* ``train``          FedAvg with the mechanism between clients and server (``auditkit train`` runs it alone);
* ``account``        the one-round claim and the claim composed over the rounds run (``auditkit account``);
* ``inversion``      the recorded server view inverted beside the clients' true updates (``auditkit attack``);
* ``probe``          the claim's worst case: probe clients' single-example updates at the checkpoint model;
* ``identification`` the informed adversary's identification test, judged against the claim's bound;
* ``distinguish``    black-box distinguishing and adaptive tests (``auditkit distinguish``);
* ``canary``         canary clients in the run and their scores per view (Andrew et al. 2024);
* ``recorded``       the train stage replaced by what a Flower app recorded (``auditkit audit --recorded``).

``idealized_canary`` is no stage of the audit: the one-run canary game on the mechanism alone, each canary one
independent call (``auditkit canary``).
"""
