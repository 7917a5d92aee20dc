"""Quality measurement of composites: figures (metrics), the classic tutorial swap as a reference row
(reference_poisson) and the report that renders a shot with the engine and measures it (report)."""
