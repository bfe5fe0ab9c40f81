"""The restricted unpickler of dyngrad.load(weights_only=True) and the allow-list of globals (Note [weights_only]).

Note [weights_only]: a pickle is a program for a small stack machine whose GLOBAL opcode imports any name and whose
REDUCE opcode calls it, so loading an untrusted pickle with the standard unpickler runs whatever code it names.
Like torch.load(weights_only=True) (PyTorch's default since 2.6), dyngrad.load interprets the pickle itself, with
its own loop over the opcodes (RestrictedUnpickler), and:
- GLOBAL resolves only the default globals (tensor and parameter rebuilders, storage types, dtypes, Size, device,
  OrderedDict, Counter, set, frozenset, bytearray, complex, and bytes through _codecs.encode) and those the user
  allowed (add_safe_globals / safe_globals); it never imports a module: a user-allowed object is matched by its
  name, or, for a name in torch or dyngrad, by looking it up in dyngrad modules already imported. Anything else is
  refused with pickle.UnpicklingError naming the global and how to allow it;
- REDUCE and NEWOBJ call only resolved globals; BUILD sets state only on instances of user-allowed classes (and
  plain attributes on OrderedDicts, as a state dict's `_metadata`); APPEND and SETITEM(S) fill only lists, dicts
  and sets (and instances of allowed classes); persistent ids name only storages;
- the default callables check their arguments (bytearray takes bytes, not a size to allocate; set takes a list);
- nothing is allocated from a claim in the pickle: lengths are checked against the bytes that remain, the memo is
  a dict (a huge memo index costs nothing), and every object comes from an opcode of the file.
"""
import pickle
import struct
import sys
from ._errors import bad, describe

_user_allowed = []      # entries: an object, or (object, "module.qualname") as add_safe_globals was given

# Python 2 names that protocol-2 pickles use (pickle's fix_imports)
_PY2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}


def global_name(module, name):
    return f"{_PY2_MODULES.get(module, module)}.{name}"


def _entry_name(entry):
    if isinstance(entry, tuple):
        return entry[1]
    return f"{entry.__module__}.{entry.__qualname__}"


def _check_entries(safe_globals, op):
    if not isinstance(safe_globals, (list, tuple)):
        raise TypeError(f"{op}: expected a list of globals, got {type(safe_globals).__name__}.")
    for entry in safe_globals:
        if isinstance(entry, tuple):
            if len(entry) != 2 or not isinstance(entry[1], str):
                raise TypeError(f"{op}: a tuple entry must be (object, 'module.name'), got {entry!r}.")
        elif not (hasattr(entry, "__module__") and hasattr(entry, "__qualname__")):
            raise TypeError(f"{op}: {entry!r} is not a class or a function; allow it as (object, 'module.name').")
    return list(safe_globals)


def add_safe_globals(safe_globals):
    """Marks globals (classes, functions) as safe for dyngrad.load(weights_only=True): a checkpoint may then call
    them and set the state of their instances. Each entry is the object, or (object, "module.name") to match a
    name the checkpoint spells differently from the object's `__module__.__qualname__`."""
    _user_allowed.extend(_check_entries(safe_globals, "add_safe_globals"))


def get_safe_globals():
    """The globals the user marked safe (add_safe_globals and the open safe_globals blocks)."""
    return list(_user_allowed)


def clear_safe_globals():
    """Forgets every global marked safe by add_safe_globals."""
    _user_allowed.clear()


class safe_globals:
    """`with dyngrad.serialization.safe_globals([MyModel, ...]):` marks globals safe inside the block only."""

    def __init__(self, safe_globals):
        self.safe_globals = _check_entries(safe_globals, "safe_globals")

    def __enter__(self):
        _user_allowed.extend(self.safe_globals)
        return self

    def __exit__(self, *exc):
        for entry in self.safe_globals:
            for i in range(len(_user_allowed) - 1, -1, -1):
                if _user_allowed[i] is entry:
                    del _user_allowed[i]
                    break


def user_allowed_objects():
    return [e[0] if isinstance(e, tuple) else e for e in _user_allowed]


def user_allowed_by_name(full):
    for entry in reversed(_user_allowed):
        if _entry_name(entry) == full:
            return entry[0] if isinstance(entry, tuple) else entry
    return None


def our_name_candidates(module, root):
    """The dyngrad modules a global of torch or dyngrad names (torch.nn.modules.linear -> <root>.nn.modules.linear,
    then <root>.nn), or () for a module outside both."""
    if module == "torch" or module.startswith("torch."):
        rest = module[5:]
    elif module == "dyngrad.reference" or module.startswith("dyngrad.reference."):
        rest = module[17:]
    elif module == "dyngrad" or module.startswith("dyngrad."):
        rest = module[7:]
    else:
        return ()
    candidates = [root + rest]
    if rest.startswith(".nn.modules"):
        candidates.append(root + ".nn")
    return candidates


def lookup(module_obj, qualname):
    obj = module_obj
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def our_object_if_imported(module, name, root):
    """The dyngrad object a torch or dyngrad global names, if its module is already imported (no import runs)."""
    for candidate in our_name_candidates(module, root):
        mod = sys.modules.get(candidate)
        if mod is not None:
            found = lookup(mod, name)
            if found is not None:
                return found
    return None


def unsafe_message(full):
    return (f"load: weights_only=True refused the checkpoint: it names the global {full}, which is not allowed by "
            f"default (Unsupported global: GLOBAL {full} was not an allowed global by default); loading it would "
            "run that object's code. If you trust the file's source, allow it with "
            f"`dyngrad.serialization.add_safe_globals([{full}])` or within "
            f"`with dyngrad.serialization.safe_globals([{full}]):`, or load with weights_only=False (which runs "
            "any code the file names). dyngrad.serialization.get_unsafe_globals_in_checkpoint(f) lists every such "
            "global in a file.")


class Restrictions:
    """What a restricted load may resolve and call: `defaults` maps names to objects (the loader's rebuilders and
    the default safe types), `callables` holds the default objects REDUCE may call, `containers` the types whose
    instances SETITEMS/APPENDS may fill (Note [weights_only])."""

    def __init__(self, root, defaults, callables, containers, refusals):
        self.root = root
        self.defaults = defaults
        self.callables = callables
        self.containers = containers
        self.refusals = refusals                # name -> message, for globals dyngrad knows it cannot load
        allowed = user_allowed_objects()
        self.allowed_ids = {id(o) for o in allowed}
        self._keep = allowed                    # the ids stay valid while the load runs

    def resolve(self, module, name):
        full = global_name(module, name)
        if full in self.defaults:
            return self.defaults[full]
        if full in self.refusals:
            raise bad(self.refusals[full])
        found = user_allowed_by_name(full)
        if found is not None:
            return found
        found = our_object_if_imported(_PY2_MODULES.get(module, module), name, self.root)
        if found is not None and id(found) in self.allowed_ids:
            return found
        raise pickle.UnpicklingError(unsafe_message(full))

    def allows(self, module, name):
        """Whether resolve(module, name) succeeds (for the static scan: refused names do not count as unsafe)."""
        try:
            self.resolve(module, name)
        except pickle.UnpicklingError as e:
            return isinstance(e, RuntimeError)       # InvalidCheckpointError: a global dyngrad cannot load at all
        return True

    def may_call(self, func):
        return id(func) in self.allowed_ids or any(func is c for c in self.callables)

    def may_build(self, inst):
        return id(type(inst)) in self.allowed_ids


# ----- the interpreter ---------------------------------------------------------------------------------------------
_MARK = object()        # on the stack: where a MARK opcode opened a group


class RestrictedUnpickler:
    """Interprets a pickle (protocols 0 to 5, without the opcodes that name code by text: INST, OBJ, EXT*) under
    Restrictions; persistent ids go to persistent_load. Note [weights_only]."""

    def __init__(self, data, restrictions, persistent_load, encoding="utf-8", what="data.pkl"):
        self.data = data
        self.pos = 0
        self.rules = restrictions
        self.persistent_load = persistent_load
        self.encoding = encoding
        self.what = what
        self.stack = []
        self.memo = {}

    def _malformed(self, why):
        return bad(f"{self.what} is not a valid pickle ({why}): the file is corrupt.")

    def take(self, n):
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise self._malformed(f"an opcode at byte {self.pos} reads {n} bytes past the end")
        out = self.data[self.pos:end]
        self.pos = end
        return out

    def line(self):
        end = self.data.find(b"\n", self.pos)
        if end < 0:
            raise self._malformed(f"an opcode at byte {self.pos} has no end of line")
        out = self.data[self.pos:end]
        self.pos = end + 1
        return out

    def pop(self):
        if not self.stack or self.stack[-1] is _MARK:
            raise self._malformed(f"an opcode before byte {self.pos} pops an empty stack")
        return self.stack.pop()

    def top(self):
        if not self.stack or self.stack[-1] is _MARK:
            raise self._malformed(f"an opcode before byte {self.pos} reads an empty stack")
        return self.stack[-1]

    def pop_mark(self):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i] is _MARK:
                items = self.stack[i + 1:]
                del self.stack[i:]
                return items
        raise self._malformed(f"an opcode before byte {self.pos} needs a MARK that is not there")

    def load(self):
        ops = _OPS
        while True:
            if self.pos >= len(self.data):
                raise self._malformed("it ends without STOP")
            code = self.data[self.pos]
            self.pos += 1
            handler = ops.get(code)
            if handler is None:
                raise pickle.UnpicklingError(
                    f"load: weights_only=True does not interpret pickle opcode {bytes([code])!r} (at byte "
                    f"{self.pos - 1} of {self.what}); a checkpoint written by torch.save or dyngrad.save never "
                    "uses it.")
            if handler(self) is _STOP:
                if len(self.stack) != 1:
                    raise self._malformed("STOP with more than one object on the stack")
                return self.stack.pop()

    # --- containers
    def fill_check(self, target, kinds, opcode):
        if type(target) in kinds or self.rules.may_build(target):
            return
        raise pickle.UnpicklingError(f"load: weights_only=True refused the checkpoint: {opcode} on a "
                                     f"{type(target).__name__}, which is not a container it may fill.")

    def call(self, func, args, kwargs=None, opcode="REDUCE"):
        if not self.rules.may_call(func):
            raise pickle.UnpicklingError(f"load: weights_only=True refused the checkpoint: {opcode} calls "
                                         f"{describe(func)}, which is not an allowed global.")
        if not isinstance(args, tuple):
            raise self._malformed(f"{opcode} with arguments of type {type(args).__name__}")
        if id(func) in self.rules.allowed_ids:
            return func(*args, **(kwargs or {}))          # the user's: its errors are its own
        try:
            return func(*args, **(kwargs or {}))
        except _DATA_ERRORS as e:                       # a default callable given arguments of the wrong kind
            raise self._malformed(f"{opcode} at byte {self.pos - 1}: {type(e).__name__}: {e}") from None


_STOP = object()
# what Python raises when a file's values do not fit an operation (an unhashable dict key, a wrong argument)
_DATA_ERRORS = (TypeError, ValueError, AttributeError, OverflowError, KeyError, IndexError)


def _data(handler):
    """An opcode whose work may fail on the file's values (hashing keys): such a failure means a malformed file."""
    def run(u):
        try:
            return handler(u)
        except _DATA_ERRORS as e:
            raise u._malformed(f"{type(e).__name__} at byte {u.pos - 1}: {e}") from None
    return run


def _op(table, code):
    def register(f):
        table[code[0] if isinstance(code, bytes) else code] = f
        return f
    return register


_OPS = {}
P = pickle


def _push(value):
    return lambda u: u.stack.append(value)


_OPS[P.NONE[0]] = _push(None)
_OPS[P.NEWTRUE[0]] = _push(True)
_OPS[P.NEWFALSE[0]] = _push(False)
_OPS[P.STOP[0]] = lambda u: _STOP
_OPS[P.MARK[0]] = lambda u: u.stack.append(_MARK)
_OPS[P.POP[0]] = lambda u: u.stack.pop() if u.stack else u.pop()
_OPS[P.POP_MARK[0]] = lambda u: u.pop_mark()
_OPS[P.DUP[0]] = lambda u: u.stack.append(u.top())
_OPS[P.EMPTY_LIST[0]] = lambda u: u.stack.append([])
_OPS[P.EMPTY_DICT[0]] = lambda u: u.stack.append({})
_OPS[P.EMPTY_TUPLE[0]] = lambda u: u.stack.append(())
_OPS[P.EMPTY_SET[0]] = lambda u: u.stack.append(set())
_OPS[P.BININT[0]] = lambda u: u.stack.append(struct.unpack("<i", u.take(4))[0])
_OPS[P.BININT1[0]] = lambda u: u.stack.append(u.take(1)[0])
_OPS[P.BININT2[0]] = lambda u: u.stack.append(struct.unpack("<H", u.take(2))[0])
_OPS[P.BINFLOAT[0]] = lambda u: u.stack.append(struct.unpack(">d", u.take(8))[0])
_OPS[P.LONG1[0]] = lambda u: u.stack.append(int.from_bytes(u.take(u.take(1)[0]), "little", signed=True))
_OPS[P.LONG4[0]] = lambda u: u.stack.append(int.from_bytes(u.take(struct.unpack("<i", u.take(4))[0]), "little",
                                                             signed=True))
_OPS[P.PROTO[0]] = lambda u: u.take(1)[0] <= 5 or u._bad_proto()
_OPS[P.FRAME[0]] = lambda u: u.take(8)
_OPS[P.LIST[0]] = lambda u: u.stack.append(u.pop_mark())
_OPS[P.TUPLE[0]] = lambda u: u.stack.append(tuple(u.pop_mark()))
_OPS[P.FROZENSET[0]] = _data(lambda u: u.stack.append(frozenset(u.pop_mark())))


def _bad_proto(u):
    raise u._malformed("a protocol newer than 5")


RestrictedUnpickler._bad_proto = _bad_proto


def _text_number(u, kind, convert):
    text = u.line()
    try:
        u.stack.append(convert(text))
    except ValueError:
        raise u._malformed(f"{kind} {text[:40]!r}") from None


# protocol 0's INT also spells booleans (I01, I00); LONG ends with an L
_OPS[P.INT[0]] = lambda u: _text_number(u, "INT", lambda t: t == b"01" if t in (b"00", b"01") else int(t))
_OPS[P.LONG[0]] = lambda u: _text_number(u, "LONG", lambda t: int(t.rstrip(b"L")))
_OPS[P.FLOAT[0]] = lambda u: _text_number(u, "FLOAT", float)


def _text(u, raw):
    try:
        return str(raw, "utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise u._malformed("a string that is not UTF-8") from None


_OPS[P.BINUNICODE[0]] = lambda u: u.stack.append(_text(u, u.take(struct.unpack("<I", u.take(4))[0])))
_OPS[P.SHORT_BINUNICODE[0]] = lambda u: u.stack.append(_text(u, u.take(u.take(1)[0])))
_OPS[P.BINUNICODE8[0]] = lambda u: u.stack.append(_text(u, u.take(struct.unpack("<Q", u.take(8))[0])))
_OPS[P.SHORT_BINBYTES[0]] = lambda u: u.stack.append(bytes(u.take(u.take(1)[0])))
_OPS[P.BINBYTES[0]] = lambda u: u.stack.append(bytes(u.take(struct.unpack("<I", u.take(4))[0])))
_OPS[P.BINBYTES8[0]] = lambda u: u.stack.append(bytes(u.take(struct.unpack("<Q", u.take(8))[0])))
_OPS[P.BYTEARRAY8[0]] = lambda u: u.stack.append(bytearray(u.take(struct.unpack("<Q", u.take(8))[0])))


def _py2_string(u, raw):
    if u.encoding == "bytes":
        return bytes(raw)
    try:
        return raw.decode(u.encoding)
    except (UnicodeDecodeError, LookupError) as e:
        raise u._malformed(f"a Python 2 string that is not {u.encoding} ({e})") from None


_OPS[P.SHORT_BINSTRING[0]] = lambda u: u.stack.append(_py2_string(u, u.take(u.take(1)[0])))
_OPS[P.BINSTRING[0]] = lambda u: u.stack.append(_py2_string(u, u.take(struct.unpack("<i", u.take(4))[0])))
_OPS[P.TUPLE1[0]] = lambda u: u.stack.append((u.pop(),))
_OPS[P.TUPLE2[0]] = lambda u: u.stack.append(tuple(reversed((u.pop(), u.pop()))))
_OPS[P.TUPLE3[0]] = lambda u: u.stack.append(tuple(reversed((u.pop(), u.pop(), u.pop()))))


# --- memo
def _get(u, index):
    if index not in u.memo:
        raise u._malformed(f"a memo lookup of {index}, which was never stored")
    u.stack.append(u.memo[index])


def _put(u, index):
    u.memo[index] = u.top()


_OPS[P.BINGET[0]] = lambda u: _get(u, u.take(1)[0])
_OPS[P.LONG_BINGET[0]] = lambda u: _get(u, struct.unpack("<I", u.take(4))[0])
_OPS[P.BINPUT[0]] = lambda u: _put(u, u.take(1)[0])
_OPS[P.LONG_BINPUT[0]] = lambda u: _put(u, struct.unpack("<I", u.take(4))[0])
_OPS[P.MEMOIZE[0]] = lambda u: _put(u, len(u.memo))


@_op(_OPS, P.GET)
def _get_text(u):
    try:
        _get(u, int(u.line()))
    except ValueError:
        raise u._malformed("GET without a number") from None


@_op(_OPS, P.PUT)
def _put_text(u):
    try:
        _put(u, int(u.line()))
    except ValueError:
        raise u._malformed("PUT without a number") from None


# --- containers
_LISTS = (list,)
_SETS = (set,)


@_op(_OPS, P.APPEND)
def _append(u):
    item = u.pop()
    target = u.top()
    u.fill_check(target, _LISTS, "APPEND")
    target.append(item)


@_op(_OPS, P.APPENDS)
def _appends(u):
    items = u.pop_mark()
    target = u.top()
    u.fill_check(target, _LISTS, "APPENDS")
    if type(target) is list:
        target.extend(items)
    else:
        for item in items:
            target.append(item)


@_op(_OPS, P.SETITEM)
@_data
def _setitem(u):
    value, key = u.pop(), u.pop()
    target = u.top()
    u.fill_check(target, u.rules.containers, "SETITEM")
    target[key] = value


@_op(_OPS, P.SETITEMS)
@_data
def _setitems(u):
    items = u.pop_mark()
    target = u.top()
    u.fill_check(target, u.rules.containers, "SETITEMS")
    if len(items) % 2:
        raise u._malformed("SETITEMS with an odd number of items")
    for i in range(0, len(items), 2):
        target[items[i]] = items[i + 1]


@_op(_OPS, P.DICT)
@_data
def _dict(u):
    items = u.pop_mark()
    if len(items) % 2:
        raise u._malformed("DICT with an odd number of items")
    u.stack.append({items[i]: items[i + 1] for i in range(0, len(items), 2)})


@_op(_OPS, P.ADDITEMS)
@_data
def _additems(u):
    items = u.pop_mark()
    target = u.top()
    u.fill_check(target, _SETS, "ADDITEMS")
    for item in items:
        target.add(item)


# --- globals, calls, state
@_op(_OPS, P.GLOBAL)
def _global(u):
    module, name = u.line(), u.line()
    try:
        module, name = module.decode("utf-8"), name.decode("utf-8")
    except UnicodeDecodeError:
        raise u._malformed("a GLOBAL name that is not UTF-8") from None
    u.stack.append(u.rules.resolve(module, name))


@_op(_OPS, P.STACK_GLOBAL)
def _stack_global(u):
    name, module = u.pop(), u.pop()
    if not isinstance(module, str) or not isinstance(name, str):
        raise u._malformed("STACK_GLOBAL without two strings")
    u.stack.append(u.rules.resolve(module, name))


@_op(_OPS, P.REDUCE)
def _reduce(u):
    args = u.pop()
    func = u.pop()
    u.stack.append(u.call(func, args))


@_op(_OPS, P.NEWOBJ)
def _newobj(u):
    args = u.pop()
    cls = u.pop()
    u.stack.append(_new(u, cls, args, {}, "NEWOBJ"))


@_op(_OPS, P.NEWOBJ_EX)
def _newobj_ex(u):
    kwargs, args, cls = u.pop(), u.pop(), u.pop()
    if not isinstance(kwargs, dict):
        raise u._malformed("NEWOBJ_EX without a dict of keyword arguments")
    u.stack.append(_new(u, cls, args, kwargs, "NEWOBJ_EX"))


def _new(u, cls, args, kwargs, opcode):
    if not isinstance(cls, type) or not u.rules.may_call(cls):
        raise pickle.UnpicklingError(f"load: weights_only=True refused the checkpoint: {opcode} creates a "
                                     f"{getattr(cls, '__qualname__', None) or describe(cls)}, which is not an "
                                     "allowed class.")
    if not isinstance(args, tuple):
        raise u._malformed(f"{opcode} with arguments of type {type(args).__name__}")
    return cls.__new__(cls, *args, **kwargs)


@_op(_OPS, P.BUILD)
def _build(u):
    state = u.pop()
    inst = u.top()
    if isinstance(inst, dict) and type(inst) in u.rules.containers and not u.rules.may_build(inst):
        # a state dict's `_metadata`: plain attributes, none shadowing a method
        if not isinstance(state, dict):
            raise u._malformed(f"BUILD of an OrderedDict with a {type(state).__name__} state")
        set_attributes(inst, state, "an OrderedDict")
        return
    if not u.rules.may_build(inst):
        raise pickle.UnpicklingError(f"load: weights_only=True refused the checkpoint: BUILD sets the state of a "
                                     f"{type(inst).__name__}, which is not an allowed class.")
    setstate = getattr(inst, "__setstate__", None)
    if setstate is not None:
        setstate(state)
        return
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    if state:
        inst.__dict__.update(state)
    if slots:
        for key, value in slots.items():
            setattr(inst, key, value)


@_op(_OPS, P.BINPERSID)
def _binpersid(u):
    pid = u.pop()
    u.stack.append(u.persistent_load(pid))


def set_attributes(obj, state, what):
    """Restores Python attributes (a state dict's _metadata, a Parameter's attributes): string names that are
    not dunders and shadow nothing the object already has (a method, a property, an engine field)."""
    for key, value in state.items():
        if (not isinstance(key, str) or key.startswith("__") or hasattr(type(obj), key)
                or key in getattr(obj, "__dict__", {})):
            raise bad(f"the checkpoint sets the attribute {describe(key)} on {what}, which would replace part of it; "
                      "refused.")
        setattr(obj, key, value)


# ----- static scan -------------------------------------------------------------------------------------------------
def globals_in_pickle(data):
    """The (module, name) of every global a pickle's GLOBAL and STACK_GLOBAL opcodes reference, without running it
    (STACK_GLOBAL's strings are followed through the memo)."""
    import pickletools
    found, strings, memo = [], [], {}
    try:
        for op, arg, _ in pickletools.genops(data):
            if op.name == "GLOBAL":
                module, _, name = arg.partition(" ")
                found.append((_PY2_MODULES.get(module, module), name))
            elif op.name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"):
                strings.append(arg)
            elif op.name in ("BINPUT", "LONG_BINPUT", "PUT"):
                memo[arg] = strings[-1] if strings else None
            elif op.name == "MEMOIZE":
                memo[len(memo)] = strings[-1] if strings else None
            elif op.name in ("BINGET", "LONG_BINGET", "GET") and isinstance(memo.get(arg), str):
                strings.append(memo[arg])
            elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
                found.append((strings[-2], strings[-1]))
    except (ValueError, EOFError) as e:
        raise bad(f"data.pkl is not a valid pickle ({e}): the file is corrupt.", "get_unsafe_globals_in_checkpoint")
    return list(dict.fromkeys(found))
