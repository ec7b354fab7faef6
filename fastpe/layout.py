"""Convert between the two RoPE channel layouts, for activations and projection weights.

RoPE rotates channel pairs. Checkpoints disagree on which channels form a pair:

- *interleaved* (GPT-J, the original Meta LLaMA code, fastpe's default): pair ``i`` is
  channels ``(2i, 2i + 1)``;
- *half* (Hugging Face ``rotate_half``, GPT-NeoX): pair ``i`` is channels
  ``(i, i + rotary_dim / 2)``.

Both use frequency ``base ** (-2i / rotary_dim)`` for pair ``i``, so permuting the channels
of the rotated block converts one layout into the other, and rotating then permuting equals
permuting then rotating. Channels past ``rotary_dim`` (partial rotary embeddings) are not
rotated and are left where they are.

Because a query/key is ``x @ W.T``, permuting the *rows* of the query and key projection
weights (within each head) converts a checkpoint once, for free at run time: after
:func:`interleaved_to_half_weights` a model written for the half layout computes exactly
what the original did in the interleaved layout (attention scores ``q . k`` are unchanged by
permuting both ``q`` and ``k`` alike).

Examples
--------
>>> import numpy as np
>>> from fastpe.layout import half_to_interleaved, interleaved_to_half
>>> x = np.array([0, 10, 1, 11, 2, 12, 3, 13])  # pairs (0, 10), (1, 11), ...
>>> interleaved_to_half(x)
array([ 0,  1,  2,  3, 10, 11, 12, 13])
>>> half_to_interleaved(interleaved_to_half(x))
array([ 0, 10,  1, 11,  2, 12,  3, 13])
"""

from __future__ import annotations

import numpy as np

from ._args import check_choice, check_int, check_rotary_dim

__all__ = [
    "half_to_interleaved",
    "half_to_interleaved_weights",
    "interleaved_to_half",
    "interleaved_to_half_weights",
    "layout_permutation",
]

_LAYOUTS = ("half", "interleaved")


def _check_rotary_dim(rotary_dim: object, length: int, what: str) -> int:
    """``rotary_dim`` (None: the whole axis, which must then be even) <= ``length``."""
    if rotary_dim is None:
        rotary_dim = length
    return check_rotary_dim(rotary_dim, length, what)


def layout_permutation(
    rotary_dim: int, head_dim: int | None = None, *, to: str = "half"
) -> np.ndarray:
    """Index array that converts one head's channels to the layout ``to``.

    ``y = x[..., perm]`` (or ``np.take(x, perm, axis)``) converts ``x`` to layout ``to``:
    ``y[j] = x[perm[j]]``. The two permutations are inverses of each other.

    Parameters
    ----------
    rotary_dim : int
        Number of rotated channels, even and > 0.
    head_dim : int or None
        Channels per head, ``>= rotary_dim`` (default ``rotary_dim``). Channels
        ``rotary_dim..head_dim - 1`` map to themselves.
    to : {"half", "interleaved"}
        The layout to convert *to*; the input is in the other one.

    Returns
    -------
    numpy.ndarray
        int64 array of length ``head_dim``, a permutation of ``range(head_dim)``.

    Raises
    ------
    TypeError
        For a ``rotary_dim`` or ``head_dim`` that is not an integer, a ``to`` that is not a
        string.
    ValueError
        For an odd, non-positive or too large ``rotary_dim``, a bad ``head_dim``, or an
        unknown ``to``.

    Examples
    --------
    >>> layout_permutation(8).tolist()
    [0, 2, 4, 6, 1, 3, 5, 7]
    >>> layout_permutation(4, 6, to="interleaved").tolist()
    [0, 2, 1, 3, 4, 5]
    """
    check_choice(to, "to", _LAYOUTS)
    if head_dim is None:
        head_dim = check_int(rotary_dim, "rotary_dim")
    head_dim = check_int(head_dim, "head_dim")
    if head_dim <= 0:
        raise ValueError(f"head_dim must be > 0, got {head_dim}")
    rotary_dim = _check_rotary_dim(rotary_dim, head_dim, "head_dim")
    half = rotary_dim // 2
    if to == "half":
        # half[i] = inter[2i], half[i + h] = inter[2i + 1]
        rotated = np.concatenate(
            [
                np.arange(0, rotary_dim, 2, dtype=np.int64),
                np.arange(1, rotary_dim, 2, dtype=np.int64),
            ]
        )
    else:
        # inter[2i] = half[i], inter[2i + 1] = half[i + h]
        first = np.arange(half, dtype=np.int64)
        rotated = np.stack([first, first + half], axis=-1).reshape(-1)
    return np.concatenate([rotated, np.arange(rotary_dim, head_dim, dtype=np.int64)])


def _convert(x, rotary_dim, axis, to: str) -> np.ndarray:
    x = np.asanyarray(x)  # subclasses kept: np.take permutes a masked array's mask too
    if x.ndim == 0:
        raise ValueError("x must have at least one dimension, got a 0-d array")
    ax = check_int(axis, "axis")
    if not -x.ndim <= ax < x.ndim:
        raise ValueError(
            f"axis {ax} is out of range for an array of shape {x.shape} "
            f"(valid: {-x.ndim}..{x.ndim - 1})"
        )
    length = x.shape[ax]
    rot = _check_rotary_dim(rotary_dim, length, f"the length of axis {ax}")
    perm = layout_permutation(rot, length, to=to)
    return np.take(x, perm, axis=ax)


def interleaved_to_half(x, *, rotary_dim: int | None = None, axis: int = -1) -> np.ndarray:
    """Convert channels from the interleaved layout to the half layout.

    Channel ``2i`` moves to ``i`` and ``2i + 1`` to ``i + rotary_dim / 2``, for the first
    ``rotary_dim`` channels of ``axis``; later channels stay.

    Parameters
    ----------
    x : array_like
        Input, any dtype and shape.
    rotary_dim : int or None
        Number of rotated channels (even, > 0, <= ``x.shape[axis]``); default the whole axis.
    axis : int, default -1
        The channel axis.

    Returns
    -------
    numpy.ndarray
        A new array of the same shape, dtype and class (a masked array keeps its mask,
        permuted alike); ``x`` is not modified.

    Raises
    ------
    TypeError
        For a ``rotary_dim`` or ``axis`` that is not an integer (``4.0`` included).
    ValueError
        For a bad ``rotary_dim`` or ``axis``.

    Examples
    --------
    >>> import numpy as np
    >>> interleaved_to_half(np.arange(6), rotary_dim=4)
    array([0, 2, 1, 3, 4, 5])
    """
    return _convert(x, rotary_dim, axis, "half")


def half_to_interleaved(x, *, rotary_dim: int | None = None, axis: int = -1) -> np.ndarray:
    """Convert channels from the half layout to the interleaved layout.

    The inverse of :func:`interleaved_to_half`: channel ``i`` moves to ``2i`` and
    ``i + rotary_dim / 2`` to ``2i + 1``, for the first ``rotary_dim`` channels of ``axis``;
    later channels stay.

    Parameters
    ----------
    x : array_like
        Input, any dtype and shape.
    rotary_dim : int or None
        Number of rotated channels (even, > 0, <= ``x.shape[axis]``); default the whole axis.
    axis : int, default -1
        The channel axis.

    Returns
    -------
    numpy.ndarray
        A new array of the same shape, dtype and class (a masked array keeps its mask,
        permuted alike); ``x`` is not modified.

    Raises
    ------
    TypeError
        For a ``rotary_dim`` or ``axis`` that is not an integer (``4.0`` included).
    ValueError
        For a bad ``rotary_dim`` or ``axis``.

    Examples
    --------
    >>> import numpy as np
    >>> half_to_interleaved(np.arange(6), rotary_dim=4)
    array([0, 2, 1, 3, 4, 5])
    """
    return _convert(x, rotary_dim, axis, "interleaved")


def _convert_weights(w, num_heads, head_dim, rotary_dim, to: str) -> np.ndarray:
    w = np.asanyarray(w)
    if w.ndim == 0:
        raise ValueError(
            "w must be a (num_heads * head_dim, hidden) weight or a (num_heads * head_dim,) "
            "bias, got a 0-d array"
        )
    rows = w.shape[0]
    num_heads = check_int(num_heads, "num_heads")
    if num_heads <= 0:
        raise ValueError(f"num_heads must be > 0, got {num_heads}")
    if head_dim is None:
        if rows % num_heads:
            raise ValueError(
                f"w has {rows} rows, not a multiple of num_heads={num_heads}; pass the right "
                f"num_heads (num_key_value_heads for k_proj in grouped-query attention)"
            )
        head_dim = rows // num_heads
    head_dim = check_int(head_dim, "head_dim")
    if head_dim <= 0:
        raise ValueError(f"head_dim must be > 0, got {head_dim}")
    if num_heads * head_dim != rows:
        raise ValueError(
            f"w has {rows} rows but num_heads * head_dim = {num_heads} * {head_dim} = "
            f"{num_heads * head_dim}; rows must be the output channels of all heads"
        )
    rot = _check_rotary_dim(rotary_dim, head_dim, "head_dim")
    perm = layout_permutation(rot, head_dim, to=to)
    rows_perm = (np.arange(num_heads, dtype=np.int64)[:, None] * head_dim + perm).reshape(-1)
    return np.take(w, rows_perm, axis=0)


def interleaved_to_half_weights(
    w, *, num_heads: int, head_dim: int | None = None, rotary_dim: int | None = None
) -> np.ndarray:
    """Permute query/key projection rows from the interleaved to the half layout, per head.

    For ``q = x @ w.T`` (``torch.nn.Linear`` convention) the rows of ``w`` are the output
    channels, head after head. Permuting them within each head as
    :func:`interleaved_to_half` permutes channels makes the projection produce half-layout
    queries/keys. This is the permutation the LLaMA-to-Hugging-Face conversion applies.

    Parameters
    ----------
    w : array_like
        Weight of shape ``(num_heads * head_dim, hidden)``, or a bias of shape
        ``(num_heads * head_dim,)``; any trailing shape is carried along.
    num_heads : int
        Heads in ``w`` (use the number of key/value heads for a grouped-query ``k_proj``).
    head_dim : int or None
        Channels per head; default ``w.shape[0] // num_heads``.
    rotary_dim : int or None
        Rotated channels per head (even, > 0, <= ``head_dim``); default ``head_dim``.

    Returns
    -------
    numpy.ndarray
        A new array of the same shape, dtype and class (a masked array keeps its mask,
        permuted alike); ``w`` is not modified.

    Raises
    ------
    TypeError
        For ``num_heads``, ``head_dim`` or ``rotary_dim`` that is not an integer.
    ValueError
        If the shape does not match ``num_heads`` / ``head_dim`` or ``rotary_dim`` is bad.

    Examples
    --------
    >>> import numpy as np
    >>> w = np.arange(8)[:, None] * np.ones((1, 2), dtype=int)  # 2 heads of 4 channels
    >>> interleaved_to_half_weights(w, num_heads=2)[:, 0]
    array([0, 2, 1, 3, 4, 6, 5, 7])
    """
    return _convert_weights(w, num_heads, head_dim, rotary_dim, "half")


def half_to_interleaved_weights(
    w, *, num_heads: int, head_dim: int | None = None, rotary_dim: int | None = None
) -> np.ndarray:
    """Permute query/key projection rows from the half to the interleaved layout, per head.

    The inverse of :func:`interleaved_to_half_weights`; use it to run a Hugging Face
    checkpoint (half layout) with ``layout="interleaved"``.

    Parameters
    ----------
    w : array_like
        Weight of shape ``(num_heads * head_dim, hidden)``, or a bias of shape
        ``(num_heads * head_dim,)``; any trailing shape is carried along.
    num_heads : int
        Heads in ``w`` (use the number of key/value heads for a grouped-query ``k_proj``).
    head_dim : int or None
        Channels per head; default ``w.shape[0] // num_heads``.
    rotary_dim : int or None
        Rotated channels per head (even, > 0, <= ``head_dim``); default ``head_dim``.

    Returns
    -------
    numpy.ndarray
        A new array of the same shape, dtype and class (a masked array keeps its mask,
        permuted alike); ``w`` is not modified.

    Raises
    ------
    TypeError
        For ``num_heads``, ``head_dim`` or ``rotary_dim`` that is not an integer.
    ValueError
        If the shape does not match ``num_heads`` / ``head_dim`` or ``rotary_dim`` is bad.

    Examples
    --------
    >>> import numpy as np
    >>> half_to_interleaved_weights(np.arange(8), num_heads=2)  # a bias vector
    array([0, 2, 1, 3, 4, 6, 5, 7])
    """
    return _convert_weights(w, num_heads, head_dim, rotary_dim, "interleaved")
