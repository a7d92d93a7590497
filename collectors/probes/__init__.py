"""Readers of the host's own counters (/proc, /sys, process tables): no Django, no state."""
