"""Static bounding-volume hierarchies of the element meshes (tets of a compliant mesh, triangles
of a rigid surface), built once per mesh on the host in the mesh's own frame (the frame of the
pool's vertices, tet_X_G / tri_X_G), as Drake does (one BVH per mesh, queried in the other
mesh's frame). A mesh never deforms, so its tree never changes; the broad phase
(collision.broadphase) only transforms its query into the tree's frame.

Layout (one pool for all meshes, depth-first preorder, so a node's first child is the next
node): bvh_box (N, 2, 3) [m] node boxes, mesh frame; bvh_node (N, 4) i32: (escape, first,
count, 0), where escape is the node after the node's subtree (where a traversal goes when the
box misses) and a leaf (count > 0) holds the elements bvh_elem[first:first + count] (element
indices within the mesh) whose boxes are bvh_elem_box[first:first + count] (mesh frame); an
inner node has count = 0. A mesh's tree is nodes [root,
escape of root). The traversal is stackless:

    node = root; end = escape(root)
    while node < end:
        if the query meets box(node): visit the leaf's elements (if a leaf); node += 1
        else: node = escape(node)
"""

from __future__ import annotations

import numpy as np

from ..types import TETMESH

__all__ = ["LEAF_SIZE", "MeshTree", "build_tree", "concatenate_trees", "element_boxes", "mesh_trees", "outward_float32"]

LEAF_SIZE = 4
"""Elements per leaf at most: fewer nodes to visit for a little more exact testing."""


class MeshTree:
    """One mesh's tree: box (N, 2, 3) float64 [m], node (N, 4) int32 (escape, first, count, 0,
    indices local to this tree), elem (E,) int32 (element order of the leaves), elem_box (E, 2,
    3) [m] their boxes."""

    def __init__(self, box: np.ndarray, node: np.ndarray, elem: np.ndarray, elem_box: np.ndarray):
        self.box, self.node, self.elem, self.elem_box = box, node, elem, elem_box


def build_tree(element_boxes: np.ndarray) -> MeshTree:
    """Median-split tree over element boxes (E, 2, 3) [m]: each node splits its elements at the
    median of their box centres along the longest axis of the centres' spread, down to
    LEAF_SIZE elements per leaf. Balanced: depth about log2(E / LEAF_SIZE)."""
    boxes = np.asarray(element_boxes, dtype=np.float64)
    n = len(boxes)
    if n == 0:
        raise ValueError("build_tree: a mesh without elements has no tree")
    centres = 0.5 * (boxes[:, 0] + boxes[:, 1])
    order = np.arange(n, dtype=np.int64)
    node_box: list[np.ndarray] = []
    node: list[list[int]] = []

    def build(lo: int, hi: int) -> None:  # elements order[lo:hi]; appends its subtree in preorder
        idx = order[lo:hi]
        me = len(node)
        node_box.append(np.stack([boxes[idx, 0].min(axis=0), boxes[idx, 1].max(axis=0)]))
        node.append([0, lo, 0, 0])
        if hi - lo <= LEAF_SIZE:
            node[me][2] = hi - lo
        else:
            c = centres[idx]
            axis = int(np.argmax(c.max(axis=0) - c.min(axis=0)))
            mid = (hi - lo) // 2
            part = np.argpartition(c[:, axis], mid, kind="introselect")
            order[lo:hi] = idx[part]
            build(lo, lo + mid)
            build(lo + mid, hi)
        node[me][0] = len(node)

    build(0, n)
    return MeshTree(np.array(node_box), np.array(node, dtype=np.int32), order.astype(np.int32), boxes[order])


def concatenate_trees(trees: list[MeshTree]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """(bvh_box (N, 2, 3), bvh_node (N, 4), bvh_elem (M,), bvh_elem_box (M, 2, 3), roots): the
    trees in one pool, their node and element indices shifted to the pool's, and each tree's
    root node."""
    boxes, nodes, elems, elem_boxes, roots = [], [], [], [], []
    n_nodes = n_elems = 0
    for t in trees:
        shifted = t.node.copy()
        shifted[:, 0] += n_nodes
        shifted[:, 1] += n_elems
        roots.append(n_nodes)
        boxes.append(t.box)
        nodes.append(shifted)
        elems.append(t.elem)
        elem_boxes.append(t.elem_box)
        n_nodes += len(t.node)
        n_elems += len(t.elem)
    if not trees:  # padded: Taichi rejects empty arrays
        return np.zeros((1, 2, 3)), np.zeros((1, 4), dtype=np.int32), np.zeros(1, dtype=np.int32), np.zeros((1, 2, 3)), []
    return np.concatenate(boxes), np.concatenate(nodes), np.concatenate(elems), np.concatenate(elem_boxes), roots


def outward_float32(box: np.ndarray) -> np.ndarray:
    """Boxes (..., 2, 3) rounded outward to float32 (lower corners down, upper corners up), so
    that a box stored in float32 still contains what its float64 box contains."""
    out = box.astype(np.float32)
    out[..., 0, :] = np.where(out[..., 0, :] > box[..., 0, :], np.nextafter(out[..., 0, :], np.float32(-np.inf)), out[..., 0, :])
    out[..., 1, :] = np.where(out[..., 1, :] < box[..., 1, :], np.nextafter(out[..., 1, :], np.float32(np.inf)), out[..., 1, :])
    return out


def element_boxes(vertices: np.ndarray, elements: np.ndarray) -> np.ndarray:
    """Boxes (E, 2, 3) [m] of the elements (E, k) (vertex indices) of a mesh's vertices (V, 3)."""
    x = vertices[elements]
    return np.stack([x.min(axis=1), x.max(axis=1)], axis=1)


def mesh_trees(geometries, tree_geoms) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[int, int]]:
    """The trees of the meshes of geometries `tree_geoms` (indices into `geometries`, each a
    geometry.build.Geometry with .tets or .surface), one per distinct mesh (geometries that share
    a mesh share its tree): (bvh_box, bvh_node, bvh_elem, bvh_elem_box, root by geometry)."""
    trees: list[MeshTree] = []
    tree_of: dict[int, int] = {}
    root: dict[int, int] = {}
    for g in sorted(tree_geoms):
        geo = geometries[g]
        mesh = geo.tets if geo.kind == TETMESH else geo.surface
        if id(mesh) not in tree_of:
            cells = mesh.tets if geo.kind == TETMESH else mesh.triangles
            tree_of[id(mesh)] = len(trees)
            trees.append(build_tree(element_boxes(mesh.vertices, cells)))
        root[g] = tree_of[id(mesh)]
    box, node, elem, elem_box, roots = concatenate_trees(trees)
    return box, node, elem, elem_box, {g: roots[t] for g, t in root.items()}
