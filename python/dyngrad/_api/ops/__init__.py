"""The op families of the torch-facing API, one module each (pointwise, reduction, shape, indexing, linalg, loss,
...): functions with torch's signatures, written over the engine's core and the machinery one level up (args.py,
node_names.py, out.py, the numpy bridge). table.py names each public function by its `ops.<family>.<name>`."""
