x = 1
raise RuntimeError("broken at import")
