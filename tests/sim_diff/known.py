"""Differences between cks-sim and the real API server that cks-sim cannot remove, by step, with why.

Each is a behaviour of a part of the cluster the real side of the replay does not run (a kubelet),
or of the API server's history before the replay began; ``make sim-diff`` lists them in the report
with both answers, and fails on any other difference.
"""

KNOWN: dict[str, str] = {
    "watch nodes from an expired resourceVersion": (
        "The watch cache answers 410 Expired to a resourceVersion older than its window. cks-sim's window "
        "starts at its built state (as an API server started after its objects were written), so version 2 "
        "is too old there; the real API server of the replay was started empty and holds every event since "
        "its start, so it streams from version 2. Its window moves on only once events are older than "
        "eventFreshDuration (75 s) and beyond the cache's capacity, longer than the replay runs. The 410 "
        "itself (an ERROR event with the Status, on a 200 stream) is tests/sim/tests/test_kube_watch.py's."),
    "log of the created pod": (
        "pods/log is served by the node's kubelet, which the API server proxies to; no kubelet runs on the "
        "real side of the replay, so it answers 500 (dial to the node's address fails), where cks-sim's "
        "kubelet answers with the container's log."),
    "delete created pod": (
        "A kubelet behaviour: cks-sim's kubelet has started the pod (phase Running) by the time it is "
        "deleted; no kubelet runs on the real side, so the pod is still Pending there."),
}
