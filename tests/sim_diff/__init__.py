"""``make sim-diff``: cks-sim's Kubernetes API held to a real kube-apiserver.

kinds.py reduces a recording of the collection's requests (``CKS_SIM_KUBE_RECORD``) to request
kinds; world.py builds the same starting objects on both APIs; replay.py is the requests replayed;
compare.py says what differs; run.py runs it all and writes ``out/sim-diff/report.json``.
"""
