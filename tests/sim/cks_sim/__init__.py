"""cks-sim: a simulated CloudStack + CKS cluster that speaks the real wire protocols.

Start it with ``tests/sim/cks-sim serve --spec SPEC --state-dir DIR`` or, in-process, with
``cks_sim.server.SimServer(load_spec(path), state_dir).start()``.
"""

from __future__ import annotations

__all__ = ["__version__"]
__version__ = "0.1.0"
