"""Zip archives of the checkpoint formats (PyTorch's and the legacy .npz): a reader that checks every member's
claimed sizes against the file before anything is allocated and streams a member into an array allocated once,
and a writer of stored members aligned for memory mapping."""
import os
import struct
import zipfile
import zlib

import numpy as np

from ._errors import bad

CHUNK = 1 << 20                 # bytes read (or decompressed) at a time into a member's array
# what zipfile raises for a corrupt member as it reads it
READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError)
DEFLATE_MAX_RATIO = 1032        # deflate cannot expand data more than 1032:1 (RFC 1951's longest match per bit)
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")     # zip's local file header: 30 bytes, then name and extra


def open_input(f, op):
    """(binary file object, its size, whether we opened it). A path is opened; a file
    object must be readable and seekable (a zip is read from its end)."""
    if isinstance(f, (str, bytes, os.PathLike)):
        fh = open(f, "rb")
        return fh, os.fstat(fh.fileno()).st_size, True
    if not hasattr(f, "read"):
        raise TypeError(f"{op}: f must be a path or a binary file object, got {type(f).__name__}.")
    try:
        here = f.tell()
        f.seek(0, os.SEEK_END)
        size = f.tell()             # absolute: zip offsets count from the start of the file
        f.seek(here)
    except (AttributeError, OSError, ValueError):
        raise TypeError(f"{op}: f must be a path or a seekable binary file object, got {type(f).__name__} "
                        "(read a stream into io.BytesIO first).") from None
    return f, size, False


class Member:
    __slots__ = ("info", "data_offset")

    def __init__(self, info, data_offset):
        self.info = info
        self.data_offset = data_offset

    @property
    def size(self):
        return self.info.file_size


class ZipReader:
    """The members of a zip archive, with their extents checked once when it is opened: each member's data lies
    inside the file and no two members overlap, so the members' stored bytes add up to at most the file's size
    (overlapping members are how a small zip claims a huge total). Note [Loading untrusted files]."""

    def __init__(self, fh, file_size, what):
        self.fh = fh
        self.file_size = file_size
        self.what = what
        try:
            self.zip = zipfile.ZipFile(fh)
            infos = self.zip.infolist()
        except Exception as e:   # zipfile raises many types for a corrupt archive (BadZipFile, ValueError, ...)
            raise bad(f"{what} is not a readable zip archive ({type(e).__name__}: {e}): the file is truncated or "
                      "corrupt.") from None
        self.members = {}
        extents = []
        for info in infos:
            if info.filename in self.members:
                raise bad(f"{what} has two members named '{info.filename}'.")
            member = Member(info, self._local_data_offset(info))
            end = member.data_offset + info.compress_size
            if end > file_size:
                raise bad(f"{what}: member '{info.filename}' claims {info.compress_size} bytes at offset "
                          f"{member.data_offset}, past the end of the file ({file_size} bytes): the file is "
                          "truncated or corrupt.")
            self.members[info.filename] = member
            extents.append((info.header_offset, end, info.filename))
        extents.sort()
        for (_, end, name), (start, _, other) in zip(extents, extents[1:]):
            if start < end:
                raise bad(f"{what}: members '{name}' and '{other}' overlap in the file; refused (overlapping "
                          "members are how a small zip claims more data than it holds).")

    def _local_data_offset(self, info):
        self.fh.seek(info.header_offset)
        raw = self.fh.read(_LOCAL_HEADER.size)
        if len(raw) < _LOCAL_HEADER.size or raw[:4] != b"PK\x03\x04":
            raise bad(f"{self.what}: member '{info.filename}' has a corrupt zip header: the file is truncated or "
                      "corrupt.")
        fields = _LOCAL_HEADER.unpack(raw)
        return info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1]

    def close(self):
        self.zip.close()

    def names(self):
        return list(self.members)

    def __contains__(self, name):
        return name in self.members

    def member(self, name):
        member = self.members.get(name)
        if member is None:
            raise bad(f"{self.what} has no member '{name}'.")
        return member

    def check_claim(self, member):
        """Refuses a member whose uncompressed size the file cannot back (before anything is allocated)."""
        info = member.info
        if info.flag_bits & 0x1:
            raise bad(f"{self.what}: member '{info.filename}' is encrypted.")
        if info.compress_type == zipfile.ZIP_STORED:
            if info.file_size != info.compress_size:
                raise bad(f"{self.what}: stored member '{info.filename}' claims {info.file_size} bytes but holds "
                          f"{info.compress_size}: the file is corrupt.")
        elif info.compress_type == zipfile.ZIP_DEFLATED:
            if info.file_size > DEFLATE_MAX_RATIO * info.compress_size + 1024:
                raise bad(f"{self.what}: member '{info.filename}' claims {info.file_size} bytes from "
                          f"{info.compress_size} compressed bytes, more than deflate can expand "
                          f"({DEFLATE_MAX_RATIO}:1): the file is corrupt or a compression bomb.")
        else:
            raise bad(f"{self.what}: member '{info.filename}' uses zip compression method {info.compress_type}; "
                      "dyngrad reads stored and deflated members only.")

    def read_bytes(self, name):
        """A (small) member's bytes: data.pkl, version records."""
        out = self.read_array(name, np.dtype(np.uint8), self.member(name).size)
        return out.tobytes()

    def read_array(self, name, dtype, count, skip=0):
        """A member's bytes after its first `skip` (a header) as a new 1-d array of `count` items of `dtype`:
        allocated once, after the claim is checked, and filled by streaming (CHUNK bytes at a time, decompressing
        as it goes); the zip's CRC is checked at the end."""
        member = self.member(name)
        self.check_claim(member)
        nbytes = count * dtype.itemsize
        if member.size != skip + nbytes:
            raise bad(f"{self.what}: member '{name}' holds {member.size - skip} bytes of data, but {nbytes} were "
                      "expected.")
        out = np.empty(count, dtype=dtype)
        flat = out.view(np.uint8)
        try:
            with self.zip.open(member.info) as fp:
                fp.read(skip)
                pos = 0
                while pos < nbytes:
                    chunk = fp.read(min(CHUNK, nbytes - pos))
                    if not chunk:
                        raise bad(f"{self.what}: member '{name}' is truncated: {pos} of {nbytes} bytes.")
                    flat[pos:pos + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
                    pos += len(chunk)
                fp.read(1)      # reaches the end of the member: zipfile checks its CRC there
        except READ_ERRORS as e:
            raise bad(f"{self.what}: member '{name}' could not be read ({type(e).__name__}: {e}): the file is "
                      "truncated or corrupt.") from None
        return out

    def open(self, name):
        """A member as a stream (for reading a header), its claim checked."""
        member = self.member(name)
        self.check_claim(member)
        return self.zip.open(member.info)

    def mappable(self, name):
        """Whether a member can be memory-mapped (its bytes are stored as they are)."""
        return self.member(name).info.compress_type == zipfile.ZIP_STORED


class ZipWriter:
    """Writes stored members whose data starts at a multiple of `alignment` bytes in the file (as torch.save does,
    so that torch.load(mmap=True) and dyngrad.load(mmap=True) map aligned storages): the padding goes into each
    local header's extra field, with the id torch uses (b"FB")."""

    def __init__(self, fh, alignment=64):
        self.fh = fh
        self.alignment = alignment
        self.zip = zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED, allowZip64=True)

    def write(self, name, data):
        data = memoryview(data).cast("B")
        info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_STORED
        info.file_size = len(data)
        # zipfile adds a 20-byte zip64 field after the extra field when it decides the member needs zip64; passing
        # force_zip64 makes that decision ours (the same rule as zipfile's own for a member of known size)
        zip64 = len(data) * 1.05 > zipfile.ZIP64_LIMIT
        try:
            start = self.fh.tell()
        except (AttributeError, OSError):
            start = None            # a stream: no alignment to keep
        if start is not None:
            fixed = _LOCAL_HEADER.size + len(name.encode("utf-8")) + 4 + (20 if zip64 else 0)
            pad = -(start + fixed) % self.alignment
            info.extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad
        with self.zip.open(info, "w", force_zip64=zip64) as dest:
            dest.write(data)

    def close(self):
        self.zip.close()
