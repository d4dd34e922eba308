"""The collision stage (DESIGN §3 steps 1-3): world boxes and pair activity, candidate
element pairs from each mesh's static tree (broadphase; the trees: geometry.bvh), clipping into contact polygons
(narrowphase, with the pure geometry in clip), the flat polygon pool (pools), the pass and its
growth on overflow (pipeline), and host-side contact surfaces (surfaces)."""

from .pipeline import Collision
from .pools import Capacities, PolygonPool

__all__ = ["Capacities", "Collision", "PolygonPool"]
