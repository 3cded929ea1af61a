"""slide_bringup: the slide command line and the system files (launch, config, urdf)."""

from __future__ import annotations

__version__ = '0.1.0'
