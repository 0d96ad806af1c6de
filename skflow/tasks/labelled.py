"""Tasks from real data: the classes of a labelled data set, or splits of one data set."""

import warnings

import numpy as np

from .._validation import InvalidParameterError, as_generator, check_bool, check_int, check_real
from ._base import TaskDistribution, check_sizes, shape_text
from ._device import as_device, torch_dtype, torch_generator

__all__ = ["ClassTasks", "FewShotClassTasks", "SingleDatasetTasks"]

# Upper bound on the number of float64 random keys drawn at once by ClassTasks when it
# samples rows without replacement (bounds memory for large classes).
_MAX_KEYS_PER_CHUNK = 1 << 22


def _check_labelled(X, y, validation_fraction, standardize):
    """Validated ``(X float64 (n, d), y (n,), validation_fraction)`` of :class:`ClassTasks`."""
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"X must be a numeric array, could not convert: {exc}") from None
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got {X.ndim}-D.")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must be non-empty, got shape {X.shape}.")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or infinity.")
    y = np.asarray(y)
    if y.ndim != 1:
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        else:
            raise ValueError(f"y must be 1-D, got shape {y.shape}.")
    if len(y) != len(X):
        raise ValueError(f"len(y)={len(y)} does not match len(X)={len(X)}.")
    vf = check_real(validation_fraction, "validation_fraction", low=0.0, high=1.0, high_open=True)
    check_bool(standardize, "standardize")
    return X, y, vf


def _split_classes(y, vf, rng):
    """Per-class train/validation row indices; classes with fewer than 2 rows are dropped.

    Returns ``(labels, keep, train_rows, val_rows)``: all labels, the indices of the kept
    ones, and one sorted index array per kept class for each split.
    """
    labels, inverse, counts = np.unique(y, return_inverse=True, return_counts=True)
    small = counts < 2
    if small.all():
        raise ValueError(
            "ClassTasks needs at least one class with 2 or more rows; every class has fewer than 2."
        )
    if small.any():
        warnings.warn(
            f"{int(small.sum())} class(es) with fewer than 2 rows are excluded: "
            f"{labels[small][:10].tolist()}{' ...' if small.sum() > 10 else ''}",
            UserWarning,
            stacklevel=5,
        )
    keep = np.flatnonzero(~small)
    order = np.argsort(inverse, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)])
    train_rows, val_rows = [], []
    for c in keep:  # one permutation per class (setup only, not per sampled point)
        rows = order[starts[c] : starts[c + 1]]
        rows = rows[rng.permutation(len(rows))]
        n_val = int(round(vf * len(rows)))
        val_rows.append(np.sort(rows[:n_val]))
        train_rows.append(np.sort(rows[n_val:]))
    return labels, keep, train_rows, val_rows


def _pack_split(parts, classes):
    """Flat row indices, sizes and offsets of the classes of one split with >= 2 rows."""
    sizes = np.array([len(p) for p in parts], dtype=np.int64)
    ok = sizes >= 2
    rows = [p for p, o in zip(parts, ok, strict=True) if o]
    flat = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    sz = sizes[ok]
    return {
        "classes": classes[ok],
        "rows": flat,
        "sizes": sz,
        "offsets": np.concatenate([[0], np.cumsum(sz)[:-1]]).astype(np.int64),
    }


def _distinct_rows(rng, sizes, n):
    """``n`` distinct local row indices per task, uniformly ordered; ``sizes`` (B,) >= n.

    The ``n`` smallest of iid uniform keys over each class's rows, ordered by key, form a
    uniformly random ordered sample without replacement (chunked over tasks for memory).
    """
    B = sizes.size
    local = np.empty((B, n), dtype=np.int64)
    if B == 0 or n == 0:
        return local
    width = int(sizes.max())
    chunk = max(1, _MAX_KEYS_PER_CHUNK // width)
    for start in range(0, B, chunk):
        tasks = np.arange(start, min(B, start + chunk))
        keys = rng.random((tasks.size, width))
        keys[np.arange(width)[None, :] >= sizes[tasks][:, None]] = 2.0
        if n < width:
            cand = np.argpartition(keys, n - 1, axis=1)[:, :n]
        else:
            cand = np.broadcast_to(np.arange(width), (tasks.size, width))
        ck = np.take_along_axis(keys, cand, axis=1)
        local[tasks] = np.take_along_axis(cand, np.argsort(ck, axis=1), axis=1)
    return local


def _distinct_rows_torch(gen, sizes, n, width):
    """:func:`_distinct_rows` in Torch: ``n`` distinct local row indices (B, n) per task,
    uniformly ordered, for class sizes ``sizes`` (B,) >= n of at most ``width`` rows.

    The ``n`` smallest of iid uniform keys, in increasing order (``topk``): the same law.
    """
    import torch

    B, device = sizes.shape[0], sizes.device
    local = torch.empty((B, n), dtype=torch.int64, device=device)
    if B == 0 or n == 0:
        return local
    chunk = max(1, _MAX_KEYS_PER_CHUNK // width)
    for start in range(0, B, chunk):
        stop = min(B, start + chunk)
        keys = torch.rand((stop - start, width), generator=gen, device=device)
        keys = keys.masked_fill(torch.arange(width, device=device) >= sizes[start:stop, None], 2.0)
        local[start:stop] = torch.topk(keys, n, dim=1, largest=False, sorted=True).indices
    return local


class _LabelledTasks(TaskDistribution):
    """The task sources of a labelled data set: validated and prepared once, on first use.

    A subclass supplies ``_build()``, a dict with at least the data ``"X"`` and the usable
    ``"classes"``, and may supply ``_build_device(prep, device, dtype)``, the tensors its
    device draws index (kept per device and dtype, never pickled).
    """

    device_draws = True

    def _prepare(self):
        if getattr(self, "_prepared", None) is None:
            self._prepared = self._build()
        return self._prepared

    def _on_device(self, device, dtype):
        """The data and index tensors of the device draws on ``device`` (built once)."""
        import torch

        prep, cache = self._prepare(), self.__dict__.setdefault("_device_cache", {})
        key = (str(device), dtype)
        if key not in cache:
            tensors = self._build_device(prep, device)
            tensors["X"] = torch.as_tensor(prep["X"], device=device, dtype=dtype)
            cache[key] = tensors
        return cache[key]

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_device_cache", None)  # device tensors: rebuilt where the copy draws
        return state

    @property
    def classes_(self):
        return self._prepare()["classes"]

    @property
    def n_features(self):
        return self._prepare()["X"].shape[1]


class ClassTasks(_LabelledTasks):
    """Tasks from a labelled data set: every class is one task.

    A task draws a class uniformly at random among the classes of the requested split
    that can give one, then ``n_support + n_query`` distinct rows of that class (drawn
    without replacement): the first ``n_support`` are the support, the rest the targets,
    so a task's support rows are never among its targets.

    When a class has fewer than ``n_support + n_query`` rows in the split, the target count
    of the call shrinks to what the smallest drawable class allows, ``size - n_support``,
    and a :class:`UserWarning` names that class, its size, ``n_support`` and the shrunk
    target count; classes with at most ``n_support`` rows cannot give a single target and
    are not drawn (also with a warning naming them). Each warning is emitted once per
    instance, split and sizes.

    Nothing is fitted: on first use the data are validated and each class's rows are
    split into a train and a validation part (``validation_fraction`` of the rows of each
    class, rounded, go to validation), seeded by ``random_state``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Finite numeric data.
    y : array-like of shape (n_samples,)
        Class labels; each class is a task.
    validation_fraction : float in [0, 1), default=0.0
        Fraction of each class's rows held out for ``split="validation"``.
    random_state : None, int, RandomState or Generator, default=None
        Seeds the train/validation split (not the sampling of tasks). Use an int for a
        reproducible split.
    standardize : bool, default=False
        If True, returned rows are standardized with the mean and standard deviation of
        the train split (features with zero spread are only centered).

    Attributes
    ----------
    classes_ : ndarray
        Labels of the classes that can be drawn (at least 2 rows in total), sorted.
    n_features : int
        Number of columns of ``X``.
    mean_, scale_ : ndarray of shape (n_features,)
        Standardization statistics (zeros and ones when ``standardize=False``).

    Notes
    -----
    Classes with fewer than 2 rows in total are dropped with a :class:`UserWarning`. A
    :class:`ValueError` is raised when no class of the split has more than ``n_support``
    rows. The returned queries have shape ``(n_tasks, n_query', n_features)`` with
    ``n_query' <= n_query`` (equal unless a class is too small, see above).

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.tasks import ClassTasks
    >>> X = np.arange(60.0).reshape(20, 3)
    >>> y = np.repeat([0, 1], 10)
    >>> tasks = ClassTasks(X, y, validation_fraction=0.2, random_state=0)
    >>> S, Q = tasks.sample_task(3, 4, random_state=0)
    >>> S.shape, Q.shape, tasks.n_features, tasks.classes_.tolist()
    ((3, 3), (4, 3), 3, [0, 1])
    >>> Ss, Qs = tasks.sample_tasks(5, 1, 0, split="validation", random_state=0)
    >>> Ss.shape, Qs.shape
    ((5, 1, 3), (5, 0, 3))
    """

    def __init__(self, X, y, *, validation_fraction=0.0, random_state=None, standardize=False):
        self.X = X
        self.y = y
        self.validation_fraction = validation_fraction
        self.random_state = random_state
        self.standardize = standardize

    def __repr__(self):
        return (
            f"ClassTasks(X=<{shape_text(self.X, type(self.X).__name__)}>, "
            f"y=..., validation_fraction={self.validation_fraction!r}, "
            f"random_state={self.random_state!r}, standardize={self.standardize!r})"
        )

    # ---- lazy preparation ------------------------------------------------------------
    def _build(self):
        X, y, vf = _check_labelled(self.X, self.y, self.validation_fraction, self.standardize)
        labels, keep, train_rows, val_rows = _split_classes(y, vf, as_generator(self.random_state))
        mean, scale = np.zeros(X.shape[1]), np.ones(X.shape[1])
        if self.standardize:
            all_train = np.concatenate(train_rows)
            mean = X[all_train].mean(axis=0)
            scale = X[all_train].std(axis=0)
            scale[scale == 0] = 1.0
            X = (X - mean) / scale
        return {
            "X": X,
            "classes": labels[keep],
            "mean": mean,
            "scale": scale,
            "validation_fraction": vf,
            "train": _pack_split(train_rows, labels[keep]),
            "validation": _pack_split(val_rows, labels[keep]),
        }

    @property
    def mean_(self):
        return self._prepare()["mean"]

    @property
    def scale_(self):
        return self._prepare()["scale"]

    # ---- sampling --------------------------------------------------------------------
    def sample_task(self, n_support, n_query, random_state=None, *, split="train"):
        """Draw one task (one class).

        Parameters
        ----------
        n_support : int >= 1
            Number of support rows.
        n_query : int >= 0
            Number of query rows (fewer when the class is too small, see the class notes).
        random_state : None, int, RandomState or Generator, default=None
            Source of randomness for the task draw.
        split : {"train", "validation"}, default="train"
            Which part of each class's rows to draw from.

        Returns
        -------
        support : ndarray of shape (n_support, n_features), float64
        query : ndarray of shape (n_query', n_features), float64
        """
        supports, queries = self.sample_tasks(
            1, n_support, n_query, random_state=random_state, split=split
        )
        return supports[0], queries[0]

    def _drawable(self, split, m, q):
        """Indices of the classes of ``split`` that can give a task, and the target count.

        Warns (once per split and sizes) when classes are skipped or targets shrink.
        """
        prep = self._prepare()
        part = prep[split]
        sizes = part["sizes"]
        if len(sizes) == 0 and split == "validation" and prep["validation_fraction"] == 0:
            raise ValueError(
                "split='validation' needs validation_fraction > 0 (it is 0, so there "
                "is no validation split)."
            )
        if len(sizes) == 0:
            raise ValueError(
                f"No class has at least 2 rows in the {split} split; lower or raise "
                "validation_fraction."
            )
        ok = np.flatnonzero(sizes > m)
        if ok.size == 0:
            largest = int(sizes.max())
            raise ValueError(
                f"No class of the {split} split has more than n_support={m} rows (largest: "
                f"{largest}), so no task can hold a target row apart from its support; lower "
                "n_support (support_size) or validation_fraction."
            )
        smallest = ok[np.argmin(sizes[ok])]
        q_eff = min(q, int(sizes[smallest]) - m)
        warned = self.__dict__.setdefault("_size_warnings", set())
        if (split, m, q) not in warned and (ok.size < len(sizes) or q_eff < q):
            warned.add((split, m, q))
            self._warn_small(part, split, m, q, ok, smallest, q_eff)
        return ok, q_eff

    @staticmethod
    def _warn_small(part, split, m, q, ok, smallest, q_eff):
        msgs = []
        skipped = np.setdiff1d(np.arange(len(part["sizes"])), ok)
        if skipped.size:
            msgs.append(
                f"class(es) {part['classes'][skipped][:10].tolist()} with "
                f"{part['sizes'][skipped][:10].tolist()} rows in the {split} split have at "
                f"most n_support={m} (support_size) rows and are not drawn"
            )
        if q_eff < q:
            label, size = part["classes"][smallest].item(), int(part["sizes"][smallest])
            msgs.append(
                f"class {label!r} has {size} rows "
                f"in the {split} split, fewer than n_support + n_query (support_size + "
                f"n_targets of LearnedFlowSampler) = {m} + {q}; its "
                f"support rows are kept out of its targets, so every task gets "
                f"n_query={q_eff} targets instead of {q}"
            )
        warnings.warn("ClassTasks: " + "; ".join(msgs) + ".", UserWarning, stacklevel=4)

    @staticmethod
    def _build_device(prep, device):
        import torch

        def part(p):
            return {k: torch.as_tensor(p[k], device=device) for k in ("rows", "sizes", "offsets")}

        return {"train": part(prep["train"]), "validation": part(prep["validation"])}

    def sample_tasks(
        self, n_tasks, n_support, n_query, random_state=None, *, split="train", device=None,
        dtype=None,
    ):  # fmt: skip
        """Draw a batch of tasks (classes drawn independently, with repetition).

        Parameters
        ----------
        n_tasks : int >= 1
            Number of tasks ``B``.
        n_support : int >= 1
            Number of support rows per task.
        n_query : int >= 0
            Number of query rows per task (fewer when a class is too small, see the class
            notes).
        random_state : None, int, RandomState or Generator, default=None
            Source of randomness for the task draws.
        split : {"train", "validation"}, default="train"
            Which part of each class's rows to draw from.
        device : None, str or torch.device, default=None
            None: NumPy arrays (float64). A device: the same law drawn in Torch there from a
            local :class:`torch.Generator` seeded by ``random_state`` (the data are copied to
            the device once).
        dtype : torch.dtype, default=None
            Floating dtype of the tensors (``torch.float32`` when None).

        Returns
        -------
        supports : ndarray or tensor of shape (n_tasks, n_support, n_features)
        queries : ndarray or tensor of shape (n_tasks, n_query', n_features)
            Rows distinct from the task's support rows (and from each other).
        """
        if split not in ("train", "validation"):
            raise InvalidParameterError(f"split must be 'train' or 'validation', got {split!r}.")
        B, m, q = check_sizes(n_tasks, n_support, n_query)
        prep = self._prepare()
        part = prep[split]
        ok, q = self._drawable(split, m, q)
        if device is not None:
            return self._sample_torch(split, ok, B, m, q, random_state, device, dtype)
        rng = as_generator(random_state)
        cls = ok[rng.integers(0, ok.size, size=B)]
        local = _distinct_rows(rng, part["sizes"][cls], m + q)
        rows = part["rows"][part["offsets"][cls][:, None] + local]  # (B, m + q)
        X = prep["X"][rows]  # (B, m + q, d)
        return np.ascontiguousarray(X[:, :m]), np.ascontiguousarray(X[:, m:])

    def _sample_torch(self, split, ok, B, m, q, random_state, device, dtype):
        """The device draw of :meth:`sample_tasks` (classes ``ok`` of ``split`` drawable)."""
        import torch

        device, dtype = as_device(device), torch_dtype(dtype)
        gen = torch_generator(random_state, device)
        data = self._on_device(device, dtype)
        part = data[split]
        ok_t = torch.as_tensor(ok, device=device)
        cls = ok_t[torch.randint(0, ok.size, (B,), generator=gen, device=device)]
        width = int(self._prepare()[split]["sizes"].max())
        local = _distinct_rows_torch(gen, part["sizes"][cls], m + q, width)
        rows = part["rows"][part["offsets"][cls][:, None] + local]  # (B, m + q)
        X = data["X"][rows]
        return X[:, :m].contiguous(), X[:, m:].contiguous()


# --------------------------------------------------------------------------------------
# one data set: random support/target splits
# --------------------------------------------------------------------------------------
class SingleDatasetTasks(TaskDistribution):
    """Random support/target splits of one data set: the tasks of ``fit(X)``.

    Each task takes ``k = min(n_support, n_samples - 1)`` distinct rows of ``X`` as its
    support and draws its ``n_query`` target rows uniformly, with replacement, among the
    *other* rows, so a task's support rows are never among its targets and a model trained
    on these tasks learns to generate points it has not been shown.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Finite numeric data with at least 2 rows.

    Attributes
    ----------
    n_features : int
        Number of columns of ``X``.

    Notes
    -----
    The supports have ``k`` rows, fewer than ``n_support`` when ``X`` has at most
    ``n_support`` rows. Up to 4096 rows every task permutes all rows at once (vectorized);
    above, it draws its ``k`` support rows without replacement and redraws the few targets
    that hit one of them.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.tasks import SingleDatasetTasks
    >>> X = np.arange(20.0).reshape(10, 2)
    >>> Ss, Qs = SingleDatasetTasks(X).sample_tasks(3, 4, 6, random_state=0)
    >>> Ss.shape, Qs.shape
    ((3, 4, 2), (3, 6, 2))
    >>> bool(np.isin(Qs[0, :, 0], Ss[0, :, 0]).any())  # targets avoid the support rows
    False
    """

    def __init__(self, X):
        self.X = X

    def __repr__(self):
        return f"SingleDatasetTasks(X=<{shape_text(self.X, '?')}>)"

    def _data(self):
        X = getattr(self, "_X", None)
        if X is None:
            try:
                X = np.asarray(self.X, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"X must be a numeric array, could not convert: {exc}") from None
            if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] == 0:
                raise ValueError(f"X must be 2-D with at least 2 rows, got shape {X.shape}.")
            if not np.all(np.isfinite(X)):
                raise ValueError("X contains NaN or infinity.")
            self._X = X
        return X

    @property
    def n_features(self):
        return self._data().shape[1]

    device_draws = True

    def sample_tasks(self, n_tasks, n_support, n_query, random_state=None, *, device=None,
                     dtype=None):  # fmt: skip
        """Draw a batch of support/target splits.

        Parameters
        ----------
        n_tasks : int >= 1
            Number of tasks ``B``.
        n_support : int >= 1
            Support rows per task (at most ``n_samples - 1`` are used).
        n_query : int >= 0
            Target rows per task.
        random_state : None, int, RandomState, Generator or torch.Generator, default=None
            Source of randomness.
        device : None, str or torch.device, default=None
            None: NumPy arrays (float64). A device: tensors there, drawn in Torch from a
            local :class:`torch.Generator` seeded by ``random_state`` (above 4096 rows:
            drawn in NumPy, seeded from that generator, and copied).
        dtype : torch.dtype, default=None
            Floating dtype of the tensors (``torch.float32`` when None).

        Returns
        -------
        supports : ndarray or tensor of shape (n_tasks, k, n_features)
            ``k = min(n_support, n_samples - 1)`` distinct rows per task.
        queries : ndarray or tensor of shape (n_tasks, n_query, n_features)
            Rows of ``X`` that are not in the task's support.
        """
        X = self._data()
        B, m, q = check_sizes(n_tasks, n_support, n_query)
        if device is not None:
            return self._sample_torch(X, B, m, q, random_state, device, dtype)
        rng = as_generator(random_state)
        N = X.shape[0]
        k = min(m, N - 1)
        if N <= 4096:
            order = np.argsort(rng.random((B, N)), axis=1)
            support_idx = order[:, :k]
            pick = rng.integers(0, N - k, size=(B, q))
            query_idx = np.take_along_axis(order[:, k:], pick, axis=1)
            return X[support_idx], X[query_idx]
        # large X: draw k distinct rows per task without permuting all N rows
        support_idx = np.stack([rng.choice(N, size=k, replace=False) for _ in range(B)])
        query_idx = rng.integers(0, N, size=(B, q))
        clash = (query_idx[:, :, None] == support_idx[:, None, :]).any(axis=2)
        while clash.any():
            query_idx[clash] = rng.integers(0, N, size=int(clash.sum()))
            clash = (query_idx[:, :, None] == support_idx[:, None, :]).any(axis=2)
        return X[support_idx], X[query_idx]

    def _sample_torch(self, X, B, m, q, random_state, device, dtype):
        """The device draw of :meth:`sample_tasks`."""
        import torch

        device, dtype = as_device(device), torch_dtype(dtype)
        gen = torch_generator(random_state, device)
        N, k = X.shape[0], min(m, X.shape[0] - 1)
        if N > 4096:  # the NumPy draw (no (B, N) keys on the device), seeded from gen
            seed = int(torch.randint(0, 2**62, (1,), generator=gen, device=device))
            S, Q = self.sample_tasks(B, m, q, random_state=seed)
            return tuple(torch.as_tensor(a, device=device, dtype=dtype) for a in (S, Q))
        cache = self.__dict__.setdefault("_device_cache", {})
        key = (str(device), dtype)
        data = cache.setdefault(key, None)
        if data is None:
            data = cache[key] = torch.as_tensor(X, device=device, dtype=dtype)
        order = torch.argsort(torch.rand((B, N), generator=gen, device=device), dim=1)
        pick = torch.randint(0, N - k, (B, q), generator=gen, device=device)
        query_idx = torch.gather(order[:, k:], 1, pick)
        return data[order[:, :k]], data[query_idx]

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_device_cache", None)
        return state


# --------------------------------------------------------------------------------------
# scarce labelled data: few-shot class tasks
# --------------------------------------------------------------------------------------
class FewShotClassTasks(_LabelledTasks):
    """Few-shot tasks of a labelled data set: every class with a handful of rows is a task.

    Made for scarce data (classes of 10-100 rows). A task draws a class uniformly among the
    classes that have at least ``n_support + min_targets`` rows, takes ``n_support``
    distinct rows of it as the support and draws its ``n_query`` targets uniformly, *with
    replacement*, among the class's *other* rows. So a task's support rows are never among
    its targets, the target count never shrinks, and a class of ``k`` rows serves every
    support size up to ``k - min_targets`` (unlike :class:`ClassTasks`, whose targets are
    distinct rows and whose target count shrinks to the smallest class).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Finite numeric data.
    y : array-like of shape (n_samples,)
        Class labels; each class is a task.
    classes : array-like, optional
        The labels used (default: all). Classes with fewer than ``2 + min_targets`` rows are
        left out with a :class:`UserWarning` (they cannot give a support of 2 rows, the
        fewest that has a spread, and ``min_targets`` target rows).
    min_targets : int, default=2
        Fewest distinct rows of a class left for the targets of a task.

    Attributes
    ----------
    classes_ : ndarray
        Labels of the usable classes, sorted.
    class_sizes_ : ndarray of int
        Their row counts.
    n_features : int
        Number of columns of ``X``.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.tasks import FewShotClassTasks
    >>> X = np.random.default_rng(0).normal(size=(30, 2))
    >>> tasks = FewShotClassTasks(X, np.repeat([0, 1, 2], 10))
    >>> S, Q = tasks.sample_tasks(4, 7, 16, random_state=0)
    >>> S.shape, Q.shape, tasks.class_sizes_.tolist()
    ((4, 7, 2), (4, 16, 2), [10, 10, 10])
    """

    def __init__(self, X, y, *, classes=None, min_targets=2):
        self.X = X
        self.y = y
        self.classes = classes
        self.min_targets = min_targets

    def __repr__(self):
        dims = shape_text(self.X, type(self.X).__name__)
        return f"FewShotClassTasks(X=<{dims}>, y=..., min_targets={self.min_targets!r})"

    def _build(self):
        X, y, _ = _check_labelled(self.X, self.y, 0.0, False)
        q_min = check_int(self.min_targets, "min_targets")
        labels = np.unique(y) if self.classes is None else np.unique(np.asarray(self.classes))
        rows = [np.flatnonzero(y == c) for c in labels]
        sizes = np.array([len(r) for r in rows], dtype=np.int64)
        small = sizes < 2 + q_min
        if small.all():
            raise ValueError(
                f"FewShotClassTasks needs a class with at least {2 + q_min} rows; the largest "
                f"has {int(sizes.max()) if sizes.size else 0}."
            )
        if small.any():
            warnings.warn(
                f"FewShotClassTasks: class(es) {labels[small][:10].tolist()} with "
                f"{sizes[small][:10].tolist()} rows have fewer than 2 + min_targets = "
                f"{2 + q_min} rows and are not used.",
                UserWarning,
                stacklevel=4,
            )
        keep = np.flatnonzero(~small)
        return {
            "X": X,
            "classes": labels[keep],
            "sizes": sizes[keep],
            "rows": [rows[k] for k in keep],
            "min_targets": q_min,
        }

    @property
    def class_sizes_(self):
        return self._prepare()["sizes"]

    @staticmethod
    def _build_device(prep, device):
        import torch

        padded = np.zeros((len(prep["rows"]), int(prep["sizes"].max())), dtype=np.int64)
        for c, rows in enumerate(prep["rows"]):
            padded[c, : rows.size] = rows
        return {
            "rows": torch.as_tensor(padded, device=device),
            "sizes": torch.as_tensor(prep["sizes"], device=device),
        }

    def sample_tasks(self, n_tasks, n_support, n_query, random_state=None, *, device=None,
                     dtype=None):  # fmt: skip
        """Draw a batch of tasks (classes drawn independently, with repetition).

        Parameters
        ----------
        n_tasks : int >= 1
        n_support : int >= 1
            Support rows per task (distinct rows of the class).
        n_query : int >= 0
            Target rows per task (drawn with replacement among the class's other rows).
        random_state : None, int, RandomState, Generator or torch.Generator, default=None
        device : None, str or torch.device, default=None
            None: NumPy arrays (float64). A device: the same law drawn in Torch there from a
            local :class:`torch.Generator` seeded by ``random_state``.
        dtype : torch.dtype, default=None
            Floating dtype of the tensors (``torch.float32`` when None).

        Returns
        -------
        supports : ndarray or tensor of shape (n_tasks, n_support, n_features)
        queries : ndarray or tensor of shape (n_tasks, n_query, n_features)

        Examples
        --------
        >>> import numpy as np
        >>> X = np.random.default_rng(0).normal(size=(30, 2))
        >>> tasks = FewShotClassTasks(X, np.repeat([0, 1, 2], 10))
        >>> S, Q = tasks.sample_tasks(4, 7, 16, random_state=0, device="cpu")
        >>> tuple(S.shape), tuple(Q.shape), S.dtype
        ((4, 7, 2), (4, 16, 2), torch.float32)
        """
        B, m, q = check_sizes(n_tasks, n_support, n_query)
        prep = self._prepare()
        ok = np.flatnonzero(prep["sizes"] >= m + prep["min_targets"])
        if ok.size == 0:
            raise ValueError(
                f"No class has n_support + min_targets = {m + prep['min_targets']} rows "
                f"(largest: {int(prep['sizes'].max())}); lower n_support."
            )
        if device is not None:
            return self._sample_torch(ok, B, m, q, random_state, device, dtype)
        rng = as_generator(random_state)
        cls = ok[rng.integers(0, ok.size, size=B)]
        sizes = prep["sizes"][cls]
        local = _distinct_rows(rng, sizes, m)  # (B, m) support rows, distinct
        # targets: uniform over the size - m other rows (rank among non-support rows)
        rank = (rng.random((B, q)) * (sizes - m)[:, None]).astype(np.int64)
        others = np.sort(local, axis=1)
        for j in range(m):  # shift past every support row at or below the rank
            rank += rank >= others[:, j : j + 1]
        index = np.concatenate([local, rank], axis=1)
        rows = np.stack([prep["rows"][c][ix] for c, ix in zip(cls, index, strict=True)])
        X = prep["X"][rows]
        return np.ascontiguousarray(X[:, :m]), np.ascontiguousarray(X[:, m:])

    def _sample_torch(self, ok, B, m, q, random_state, device, dtype):
        """The device draw of :meth:`sample_tasks` (classes ``ok`` drawable)."""
        import torch

        device, dtype = as_device(device), torch_dtype(dtype)
        gen = torch_generator(random_state, device)
        data = self._on_device(device, dtype)
        ok_t = torch.as_tensor(ok, device=device)
        cls = ok_t[torch.randint(0, ok.size, (B,), generator=gen, device=device)]
        sizes = data["sizes"][cls]
        local = _distinct_rows_torch(gen, sizes, m, data["rows"].shape[1])  # (B, m) distinct
        u = torch.rand((B, q), generator=gen, device=device, dtype=torch.float64)
        rank = (u * (sizes - m)[:, None]).to(torch.int64)
        rank = _skip_rows(rank, torch.sort(local, dim=1).values)
        index = torch.cat([local, rank], dim=1)
        X = data["X"][data["rows"][cls[:, None], index]]
        return X[:, :m].contiguous(), X[:, m:].contiguous()


def _skip_rows(rank, taken):
    """The ``rank``-th (B, q) row of each task that is not one of its ``taken`` rows
    (B, m), sorted: ``rank`` plus the taken rows ``t_j`` with ``t_j - j <= rank`` (one
    ``searchsorted``; the loop of :meth:`FewShotClassTasks.sample_tasks` in NumPy).

    Examples
    --------
    >>> import torch
    >>> _skip_rows(torch.tensor([[0, 1, 2, 3]]), torch.tensor([[1, 2]])).tolist()
    [[0, 3, 4, 5]]
    """
    import torch

    shifted = taken - torch.arange(taken.shape[1], device=taken.device)  # non-decreasing
    return rank + torch.searchsorted(shifted.contiguous(), rank.contiguous(), right=True)
