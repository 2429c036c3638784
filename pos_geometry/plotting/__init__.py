"""Interactive figures (plotly) of positional-embedding geometry, and their export.

Every ``plot_*`` function returns a ``plotly.graph_objects.Figure`` and never shows it;
importing this package changes no plotly setting. Titles say what was plotted: model and
revision, the position window, and the variance share of the plotted components.
:func:`save_figure` writes offline HTML or, through kaleido and a headless Chromium,
PNG/SVG/PDF; in a notebook, :func:`use_static_fallback` adds a PNG to every displayed figure so
it also shows on GitHub and nbviewer.
"""

from pos_geometry.plotting.atlas import (
    plot_atlas_head,
    plot_atlas_heatmap,
    plot_atlas_short_share,
    plot_atlas_usage,
)
from pos_geometry.plotting.checkpoints import plot_checkpoints
from pos_geometry.plotting.columns import plot_columns
from pos_geometry.plotting.comparison import (
    plot_compare_causal,
    plot_compare_locality,
    plot_compare_residual,
    plot_compare_revisions,
    plot_compare_rotary,
)
from pos_geometry.plotting.export import figure_to_html, figure_to_image, find_browser, save_figure
from pos_geometry.plotting.grid import plot_helix_grid
from pos_geometry.plotting.helix3d import block_means, plot_helix
from pos_geometry.plotting.hidden import plot_attention_offsets, plot_hidden_metrics, plot_hidden_trajectory
from pos_geometry.plotting.interventions import plot_intervention_positions, plot_intervention_sweep
from pos_geometry.plotting.notebook import use_static_fallback
from pos_geometry.plotting.position_qk import (
    plot_position_qk_lookback,
    plot_position_qk_offsets,
    plot_position_qk_shares,
)
from pos_geometry.plotting.recurrence import plot_recurrence
from pos_geometry.plotting.similarity import plot_similarity, plot_similarity_by_offset
from pos_geometry.plotting.spectra import plot_spectrum
from pos_geometry.plotting.sweep import plot_sweep_helix, plot_sweep_metrics, plot_sweep_usage
from pos_geometry.plotting.tokens import plot_token_positions
from pos_geometry.plotting.variance import plot_explained_variance

__all__ = [
    "block_means",
    "figure_to_html",
    "figure_to_image",
    "find_browser",
    "plot_atlas_head",
    "plot_atlas_heatmap",
    "plot_atlas_short_share",
    "plot_atlas_usage",
    "plot_attention_offsets",
    "plot_checkpoints",
    "plot_columns",
    "plot_compare_causal",
    "plot_compare_locality",
    "plot_compare_residual",
    "plot_compare_revisions",
    "plot_compare_rotary",
    "plot_explained_variance",
    "plot_helix",
    "plot_helix_grid",
    "plot_hidden_metrics",
    "plot_hidden_trajectory",
    "plot_intervention_positions",
    "plot_intervention_sweep",
    "plot_position_qk_lookback",
    "plot_position_qk_offsets",
    "plot_position_qk_shares",
    "plot_recurrence",
    "plot_similarity",
    "plot_similarity_by_offset",
    "plot_spectrum",
    "plot_sweep_helix",
    "plot_sweep_metrics",
    "plot_sweep_usage",
    "plot_token_positions",
    "save_figure",
    "use_static_fallback",
]
