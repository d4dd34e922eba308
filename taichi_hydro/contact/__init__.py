"""Contact rows (DESIGN §3 step 4): each polygon of the pool becomes one compliant point
contact (assemble), stored as rows grouped by world (rows), warm-started from the previous
step (warmstart), in an order independent of thread timing when asked (ordering)."""

from .rows import ContactRows
from .warmstart import WarmStartTable

__all__ = ["ContactRows", "WarmStartTable"]
