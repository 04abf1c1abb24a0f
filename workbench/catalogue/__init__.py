"""The standard catalogue's conversions: each hub dataset's upstream rows → the frozen rows its benchmark reads."""
