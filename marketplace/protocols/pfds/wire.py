"""What `pfds` releases look like on the wire, shared by every role that sends or reads them.

A tree travels as the fields of ``pfds_tree`` / ``pfds_shared_tree`` (:func:`tree_fields`) and is
rebuilt against the receiver's own public schema (:func:`tree_from_body`); labelled synthetic
records are checked against that schema (:func:`check_records`). The curator and the agents read
releases with these same functions.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from marketplace.protocols.pfds import ClassLabels, MalformedPlain, PrivateTree, PublicSchema
from marketplace.protocols.pfds.messages import PfdsSharedTree, PfdsTree
from marketplace.protocols.pfds.tree import PLAIN_FORMAT, PLAIN_VERSION


def tree_fields(tree: PrivateTree) -> dict[str, Any]:
    """The message fields of a tree (``pfds_tree`` / ``pfds_shared_tree``)."""
    return {
        "attribute": tree.attribute,
        "threshold": tree.threshold,
        "n_children": tree.n_children,
        "counts": tree.counts,
        "h_max": tree.h_max,
        "t": tree.t,
        "neighbours": tree.neighbours,
        "spends": tuple(spend.to_plain() for spend in tree.spends),
    }


def tree_from_body(body: PfdsTree | PfdsSharedTree, schema: PublicSchema) -> PrivateTree:
    """Rebuild a received tree against the receiver's own public schema; :class:`MalformedPlain`
    names the first field that does not make a valid tree."""
    threshold = [None if math.isnan(v) else v for v in body.threshold.tolist()]
    plain = {
        "format": PLAIN_FORMAT,
        "version": PLAIN_VERSION,
        "schema": schema.to_plain(),
        "h_max": body.h_max,
        "t": body.t,
        "neighbours": body.neighbours,
        "spends": [dict(s) for s in body.spends],
        "attribute": body.attribute.tolist(),
        "threshold": threshold,
        "n_children": body.n_children.tolist(),
        "counts": body.counts.ravel().tolist(),
    }
    if body.counts.ndim != 2 or body.counts.shape[1] != schema.n_codes:
        raise MalformedPlain("$.counts", f"leaves x {schema.n_codes} label codes", f"shape {list(body.counts.shape)}")
    return PrivateTree.from_plain(plain, schema=schema)


def check_records(X: np.ndarray, y: np.ndarray, schema: PublicSchema, who: str) -> str | None:
    """Why labelled synthetic records do not fit the public schema, or None."""
    try:
        schema.check_rows(X, "X", f"the records of {who}", allow_empty=True)
        labels = y
        if isinstance(schema.label, ClassLabels):
            labels = y.astype(np.int64)
            if not np.array_equal(labels, y):
                return "class labels must be integers"
        schema.encode_labels(labels)
    except (TypeError, ValueError) as err:
        return str(err)
    return None
