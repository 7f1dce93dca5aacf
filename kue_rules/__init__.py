"""kue rules: Resc's rule engine on kue. Watchers take events from Redis lists (or from kue
job events), rules match them with regular expressions, fetch from web services, and make
tasks on Resc's lists or kue jobs. See ``kue rules --help`` and docs/rules.md.

Uses only ``kue_core``'s public API; nothing in kue_core imports it.
"""

from __future__ import annotations

from .config import Config, ConfigError, build, load, parse
from .runner import Rules
from .store import Store

__all__ = ["Config", "ConfigError", "Rules", "Store", "build", "load", "parse"]
