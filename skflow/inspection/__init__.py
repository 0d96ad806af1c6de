"""Attention inspector: is a model's attention Nadaraya-Watson kernel smoothing?

Three steps, one module each:

* :mod:`skflow.inspection.recording` -- :class:`AttentionRecorder`, a context manager that
  records the attention calls (``q``, ``k``, heads, scale, mask) made inside any
  ``torch.nn.Module`` forward;
* :mod:`skflow.inspection.analysis` -- :func:`nw_correspondence`, the comparison of every
  recorded (module, step, head) with the Gaussian-kernel Nadaraya-Watson weights of the same
  queries and keys at the matched bandwidth;
* :mod:`skflow.inspection.plotting` -- :func:`plot_nw_correspondence`, correlation and the
  fraction of NW-like heads per step (matplotlib); and :func:`plot_metric_panel`, a generated
  sample over its support and reference with :func:`skflow.metrics.metric_panel` in the title.

See ``docs/inspection.md`` for the conventions and recipes.
"""

from .analysis import NWCorrespondence, attention_weights, nw_correspondence
from .plotting import plot_metric_panel, plot_nw_correspondence
from .recording import AttentionRecord, AttentionRecorder

__all__ = [
    "AttentionRecord",
    "AttentionRecorder",
    "NWCorrespondence",
    "attention_weights",
    "nw_correspondence",
    "plot_metric_panel",
    "plot_nw_correspondence",
]
