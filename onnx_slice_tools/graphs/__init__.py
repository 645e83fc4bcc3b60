"""One model representation's utilities: the graph walker, unique names, isolated shape inference."""
