"""Position inside the network: the positional part of each layer's hidden states, and attention by offset.

The data flow::

    model (name, folder or loaded) + corpus (token ids, .npy, text, or the random default)
      -> checked once, batch size chosen (run.py)
      -> forward hooks on the blocks (forward.py), batch by batch, one pass for everything asked
      -> running sums per layer (running_sums.py)  -> pos[t], μ, context scatter
      -> metrics per layer (metrics.py)            -> HiddenPositions (decomposition.py)
      -> probe attention function (offsets.py)     -> AttentionByOffset (attention.py)
"""

from pos_geometry.hidden.attention import AttentionByOffset, attention_by_offset
from pos_geometry.hidden.decomposition import HiddenPositions, hidden_positions
from pos_geometry.hidden.metrics import METRIC_NAMES

__all__ = ["AttentionByOffset", "HiddenPositions", "METRIC_NAMES", "attention_by_offset", "hidden_positions"]
