"""The HTML front ends: the study report and the per-seed explore page."""
