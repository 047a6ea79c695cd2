"""StackedForest: several XGBoost binary classifiers evaluated in one compiled call.

The learned scheduler asks, at every tick, P(a job arrives in the next w) for
every pool and several windows w: one ``binary:logistic`` booster per window,
each on its own small matrix [n_pools, n_features_i]. Calling
``booster.inplace_predict`` once per window costs mostly XGBoost's fixed
per-call overhead (about 0.6 ms each); :class:`StackedForest` reads the trees
of all the boosters once (through XGBoost's public JSON model,
``booster.save_raw("json")``, and the base score from ``booster.save_config()``)
and evaluates every model on its own block in one numba call.

Exactness: the result is XGBoost's own to float32 rounding (the tests compare
with ``inplace_predict``). As in XGBoost's CPU predictor, a row goes left at a
split iff ``x < split_condition`` compared in float32, NaN (missing) follows the
node's default direction, the margin is accumulated in float32 starting from
the base margin and adding the trees in order, and P = 1 / (1 + exp(-margin)).

Layout (all trees of all models, contiguous): the nodes of every tree are
renumbered breadth first, so siblings are consecutive (right = left + 1). The
kernel packs per node one uint64 (left child << 32 | 2 * feature + "NaN goes
right") and a float32 threshold; a leaf is its own left child with a NaN
threshold, so every row of a tree takes exactly ``depth`` steps with no test
for leaves. Each block is first written with every value twice, NaN as -inf
then as +inf, so a step is one comparison ``x2[2 * f + nan_right] >= t``
(right) with no branch on the data: exactly XGBoost's routing, as ``-inf < t``
and ``+inf >= t`` for every threshold but -inf (a split at -inf whose missing
values go left is refused), and real infinities keep their meaning. The rows of a block walk a tree level by level, so their
(independent) steps overlap. Per tree its root and depth, per model its range
of trees and base margin.

Supported: ``gbtree`` boosters with objective ``binary:logistic``, numerical
splits, one target (any ``num_parallel_tree``). Anything else (another
objective, ``dart`` or ``gblinear``, categorical splits, vector leaves or
several targets) raises :class:`ValueError` naming what is unsupported.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numba
import numpy as np

#: The only objective whose predictions :class:`StackedForest` reproduces.
SUPPORTED_OBJECTIVE = "binary:logistic"

#: Rows walked together level by level (their node indices stay in a small buffer).
_ROW_BLOCK = 256


def _parse_vector(text: Any) -> list[float]:
    """Return the numbers of an XGBoost config value: ``"5E-1"`` or ``"[5E-1]"`` (XGBoost 3)."""
    s = str(text).strip()
    if s.startswith("[") and s.endswith("]"):
        s = s[1:-1]
    return [float(v) for v in s.split(",") if v.strip()]


def base_margin_of(base_score: float) -> np.float32:
    """Return the margin offset (float32) of a ``binary:logistic`` base score.

    XGBoost stores ``base_score`` as a (float32) probability p (0 or 1 when
    every training label was 0 or 1, clipped to [1e-6, 1 - 1e-6] here as in
    XGBoost); the predictor starts every row's margin at ``-logf(1 / p - 1)``:
    the quotient in float32, then a correctly rounded log (numpy's float32 log
    can be 1 ulp off, so the log is taken in double precision and rounded).
    """
    p = np.float32(base_score)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"StackedForest: base_score {base_score} is not in [0, 1]")
    eps = np.float32(1e-6)
    one = np.float32(1.0)
    p = min(max(p, eps), one - eps)
    return np.float32(-math.log(float(one / p - one)))


def _check_supported(model: dict, config: dict, i: int) -> tuple[float, int]:
    """Raise ValueError if model ``i`` is not supported; return (base_score, num_feature)."""
    learner = model["learner"]
    objective = learner["objective"]["name"]
    if objective != SUPPORTED_OBJECTIVE:
        raise ValueError(f"StackedForest: model {i} has objective {objective!r}; only "
                         f"{SUPPORTED_OBJECTIVE!r} is supported")
    kind = learner["gradient_booster"]["name"]
    if kind != "gbtree":
        raise ValueError(f"StackedForest: model {i} is a {kind!r} booster; only 'gbtree' is "
                         f"supported (not dart or gblinear)")
    param = config["learner"]["learner_model_param"]
    n_target = int(param.get("num_target", "1"))
    n_class = int(param.get("num_class", "0"))
    scores = _parse_vector(param["base_score"])
    if n_target > 1 or n_class > 1 or len(scores) != 1:
        raise ValueError(f"StackedForest: model {i} is multi-target (num_target={n_target}, "
                         f"num_class={n_class}, base_score={param['base_score']}); only one "
                         f"target is supported")
    return scores[0], int(param["num_feature"])


def _flatten_tree(tree: dict, i: int) -> tuple[np.ndarray, ...]:
    """Return one tree renumbered breadth first: (feature, threshold, default_left, left,
    right, value, depth), children -1 at leaves; siblings get consecutive numbers (right =
    left + 1). Raise ValueError for categorical splits or vector leaves."""
    if any(int(t) != 0 for t in tree["split_type"]) or tree.get("categories_nodes"):
        raise ValueError(f"StackedForest: model {i} has categorical splits; only numerical "
                         f"splits are supported")
    if int(tree["tree_param"].get("size_leaf_vector", "1")) > 1:
        raise ValueError(f"StackedForest: model {i} has vector leaves (multi-target trees); "
                         f"only scalar leaves are supported")
    left = tree["left_children"]
    right = tree["right_children"]
    cond = tree["split_conditions"]
    index = tree["split_indices"]
    dleft = tree["default_left"]
    order = [0]  # old ids in breadth-first order (deleted nodes are unreachable)
    level = [0]
    new_id = {0: 0}
    k = 0
    while k < len(order):
        old = order[k]
        if left[old] != -1:
            for child in (left[old], right[old]):
                new_id[child] = len(order)
                order.append(child)
                level.append(level[k] + 1)
        k += 1
    n = len(order)
    feature = np.zeros(n, dtype=np.int32)
    threshold = np.zeros(n, dtype=np.float32)
    default_left = np.zeros(n, dtype=np.bool_)
    new_left = np.full(n, -1, dtype=np.int32)
    value = np.zeros(n, dtype=np.float32)
    for new, old in enumerate(order):
        if left[old] == -1:  # a leaf: its value is in split_conditions
            value[new] = cond[old]
        else:
            feature[new] = index[old]
            threshold[new] = cond[old]
            default_left[new] = bool(dleft[old])
            new_left[new] = new_id[left[old]]
    new_right = np.where(new_left >= 0, new_left + 1, -1).astype(np.int32)
    return feature, threshold, default_left, new_left, new_right, value, max(level)


@numba.njit(cache=True, nogil=True)
def _forest_kernel(x, n_rows, n_cols, word, thr, value, root, depth, tree_start, base_margin,
                   proba, out):  # pragma: no cover - compiled
    """Fill ``out`` (float32) with every model's margin (or P if ``proba``) on its block.

    ``x`` holds the blocks (row major) one after the other, model m's being
    [n_rows[m], n_cols[m]]; ``out`` the outputs in the same order, n_rows[m] for
    model m, whose trees are ``tree_start[m]:tree_start[m + 1]``. Node n: ``word[n]`` = (left child << 32)
    | (2 * feature + NaN goes right), ``thr[n]`` its threshold (NaN at a leaf,
    whose left child is itself, so a leaf never moves).
    """
    u = np.uint64
    low = u(0xFFFFFFFF)
    # every value twice, NaN as -inf (missing goes left) then as +inf (missing goes right):
    # ``x2[2 * j + right] >= t`` is then XGBoost's routing (x < t goes left, NaN by default)
    x2 = np.empty(2 * x.shape[0], dtype=np.float32)
    for i in range(x.shape[0]):
        v = x[i]
        if v != v:
            x2[2 * i] = -np.inf
            x2[2 * i + 1] = np.inf
        else:
            x2[2 * i] = v
            x2[2 * i + 1] = v
    nodes = np.empty(_ROW_BLOCK, dtype=np.uint64)
    xs = 0
    os = 0
    for m in range(n_rows.shape[0]):
        nr = n_rows[m]
        stride = u(2 * n_cols[m])
        for r in range(nr):
            out[os + r] = base_margin[m]
        xb = x2[2 * xs:2 * (xs + nr * n_cols[m])]
        for t in range(tree_start[m], tree_start[m + 1]):
            rt = u(root[t])
            d = depth[t]
            # the rows of a block walk the tree level by level: their steps are independent
            for r0 in range(0, nr, _ROW_BLOCK):
                nb = u(min(_ROW_BLOCK, nr - r0))
                at = u(r0) * stride
                for j in range(nb):
                    nodes[j] = rt
                for _ in range(d):
                    for j in range(nb):
                        n = nodes[j]
                        w = word[n]
                        nodes[j] = (w >> u(32)) + u(xb[at + j * stride + (w & low)] >= thr[n])
                for j in range(nb):
                    out[os + r0 + np.int64(j)] += value[nodes[j]]
        if proba:
            one = np.float32(1.0)
            for r in range(nr):
                out[os + r] = one / (one + np.exp(-out[os + r]))
        xs += nr * n_cols[m]
        os += nr


class StackedForest:
    """Several ``binary:logistic`` XGBoost boosters, their trees flattened into one set of arrays.

    ``StackedForest(boosters)`` reads every booster's trees (``save_raw("json")``)
    and base score (``save_config()``); :meth:`predict_proba` and
    :meth:`predict_margin` then evaluate booster i on ``blocks[i]`` for all i in
    one compiled call. Raises ValueError for a booster it cannot reproduce
    exactly (see the module docstring).

    Attributes: ``n_models``; ``n_features`` (tuple, per model, the number of
    columns its block must have); ``n_trees`` (tuple, per model); ``base_score``
    (float64 [n_models], the stored probabilities) and ``base_margin`` (float32
    [n_models], the margins every row starts from); per node of all trees laid
    end to end ``feature`` (int32), ``threshold`` (float32), ``default_left``
    (bool), ``left`` and ``right`` (int32, absolute node numbers, -1 at a leaf;
    right = left + 1) and ``value`` (float32 leaf value, 0 at a split); per tree
    ``root`` and ``depth`` (int64); ``tree_start`` (int64 [n_models + 1]: model
    m's trees are ``tree_start[m]:tree_start[m + 1]``).
    """

    def __init__(self, boosters: Sequence[Any]) -> None:
        boosters = list(boosters)
        if not boosters:
            raise ValueError("StackedForest: no boosters given")
        parts: list[tuple[np.ndarray, ...]] = []
        tree_start = [0]
        scores, n_features, n_trees = [], [], []
        for i, booster in enumerate(boosters):
            model = json.loads(booster.save_raw("json"))
            config = json.loads(booster.save_config())
            score, n_feat = _check_supported(model, config, i)
            trees = model["learner"]["gradient_booster"]["model"]["trees"]
            parts.extend(_flatten_tree(tree, i) for tree in trees)
            tree_start.append(tree_start[-1] + len(trees))
            scores.append(score)
            n_features.append(n_feat)
            n_trees.append(len(trees))
        sizes = np.array([p[0].shape[0] for p in parts], dtype=np.int64)
        offsets = np.zeros(len(parts), dtype=np.int64)
        np.cumsum(sizes[:-1], out=offsets[1:])
        if sizes.sum() >= 2**31:
            raise ValueError(f"StackedForest: {sizes.sum()} nodes; at most 2**31 - 1 supported")
        self.n_models = len(boosters)
        self.n_features: tuple[int, ...] = tuple(n_features)
        self.n_trees: tuple[int, ...] = tuple(n_trees)
        self.base_score = np.array(scores, dtype=np.float64)
        self.base_margin = np.array([base_margin_of(s) for s in scores], dtype=np.float32)
        self.tree_start = np.array(tree_start, dtype=np.int64)
        self.root = offsets
        self.depth = np.array([p[6] for p in parts], dtype=np.int64)

        def cat(k: int, dtype: Any, shift: bool = False) -> np.ndarray:
            if not parts:
                return np.zeros(0, dtype=dtype)
            if shift:  # child numbers made absolute, -1 kept
                return np.concatenate([np.where(p[k] >= 0, p[k] + o, -1)
                                       for p, o in zip(parts, offsets, strict=True)]).astype(dtype)
            return np.concatenate([p[k] for p in parts]).astype(dtype)

        self.feature = cat(0, np.int32)
        self.threshold = cat(1, np.float32)
        self.default_left = cat(2, np.bool_)
        self.left = cat(3, np.int32, shift=True)
        self.right = cat(4, np.int32, shift=True)
        self.value = cat(5, np.float32)
        # the kernel's form: a leaf is its own left child with a NaN threshold (never moves)
        leaf = self.left < 0
        if np.any(~leaf & self.default_left & (self.threshold == -np.inf)):
            raise ValueError("StackedForest: a split at -inf sends missing values left; "
                             "NaN as -inf could not go left there (unsupported)")
        node = np.arange(self.left.shape[0], dtype=np.uint64)
        left = np.where(leaf, node, self.left.astype(np.uint64))
        column = 2 * self.feature.astype(np.uint64) + (~self.default_left).astype(np.uint64)
        self._word = (left << np.uint64(32)) | np.where(leaf, np.uint64(0), column)
        self._thr = np.where(leaf, np.float32(np.nan), self.threshold).astype(np.float32)
        self._n_cols = np.array(n_features, dtype=np.int64)

    def __repr__(self) -> str:
        return (f"StackedForest(n_models={self.n_models}, n_trees={self.n_trees}, "
                f"n_features={self.n_features})")

    def _run(self, blocks: Sequence[np.ndarray], proba: bool) -> np.ndarray | list[np.ndarray]:
        """Return the kernel's outputs: [n_models, n_rows] if all blocks have n_rows rows,
        else a list of 1-d arrays (one per block)."""
        if len(blocks) != self.n_models:
            raise ValueError(f"StackedForest: {len(blocks)} blocks for {self.n_models} models")
        flat = []
        n_rows = np.empty(self.n_models, dtype=np.int64)
        for i, b in enumerate(blocks):
            b = np.asarray(b)
            if b.ndim != 2 or b.shape[1] != self.n_features[i]:
                raise ValueError(f"StackedForest: block {i} has shape {b.shape}; model {i} "
                                 f"needs [n_rows, {self.n_features[i]}]")
            n_rows[i] = b.shape[0]
            flat.append(b.ravel())  # a copy only when not C-contiguous
        x = np.concatenate(flat, dtype=np.float32)
        out = np.empty(int(n_rows.sum()), dtype=np.float32)
        _forest_kernel(x, n_rows, self._n_cols, self._word, self._thr, self.value, self.root,
                       self.depth, self.tree_start, self.base_margin, proba, out)
        if (n_rows == n_rows[0]).all():
            return out.reshape(self.n_models, int(n_rows[0]))
        return np.split(out, np.cumsum(n_rows[:-1]))

    def predict_proba(self, blocks: Sequence[np.ndarray]) -> np.ndarray | list[np.ndarray]:
        """Return P(positive) of booster i for every row of ``blocks[i]``, all in one call.

        ``blocks[i]`` is [n_rows_i, n_features[i]] (converted to float32; NaN is
        missing). Returns float32 [n_models, n_rows] when every block has the
        same number of rows, else a list of float32 [n_rows_i] arrays. Equals
        ``booster.inplace_predict(blocks[i])`` to float32 rounding.
        """
        return self._run(blocks, True)

    def predict_margin(self, blocks: Sequence[np.ndarray]) -> np.ndarray | list[np.ndarray]:
        """Return the raw margin (log-odds) of booster i for every row of ``blocks[i]``.

        Same shapes as :meth:`predict_proba`; equals
        ``booster.inplace_predict(blocks[i], predict_type="margin")`` to float32 rounding.
        """
        return self._run(blocks, False)
