"""Every file read and written: validation, loading, atomic saving, external data."""
