"""Host numerics: code that computes on numpy arrays and never sees a tensor (special-function series, LU and LDL
factorisations, ...). The op families call it on the values the numpy bridge (_api/bridge.py) hands them."""
