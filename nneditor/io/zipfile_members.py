"""Zip archives as byte sources: list members, map stored members in place.

The central directory is parsed by the standard library's :mod:`zipfile` (it handles Zip64 and
never reads member data while listing). Member data is located from the local file header here,
so a STORED member becomes a :class:`SubSource` over the archive's own memory map: no copy.
Compressed members are inflated into memory only when first read, and only when their declared
size is below a cap.

Invariants:
- Listing reads only the central directory; opening a member reads only its 30-byte local
  header (plus the name), and every offset is bounds-checked against the archive size.
- Nothing is written; an archive with duplicate or encrypted members is refused with an
  :class:`ArtifactError`, because two readers could disagree about which bytes they mean.
- Inflation never produces more than the declared size (zipfile stops there and checks the
  CRC), and the declared size must be below ``MAX_INFLATE`` bytes.
- Whatever :mod:`zipfile` raises on a malformed archive (:data:`ZIP_ERRORS`, a corrupt
  deflate/LZMA stream) becomes an :class:`ArtifactError` sentence.
"""

from __future__ import annotations

import io
import lzma
import struct
import zipfile
import zlib
from dataclasses import dataclass

from nneditor.errors import ArtifactError
from nneditor.io.source import ByteSource, SubSource

#: Largest compressed member (declared uncompressed size) NNEditor inflates into memory.
MAX_INFLATE = 256 * 1024 * 1024

_LOCAL_HEADER = struct.Struct("<4s5H3I2H")
_LOCAL_MAGIC = b"PK\x03\x04"

#: What :mod:`zipfile` raises on malformed archives: BadZipFile, NotImplementedError for a
#: "version needed to extract" above 6.3 or an unknown compression method, UnicodeDecodeError
#: (a ValueError) for a member name flagged as UTF-8 that is not, OverflowError for offsets
#: past 2**63, EOFError and OSError for truncation.
ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    NotImplementedError,
    ValueError,
    OverflowError,
    OSError,
    EOFError,
)


def zip_problem(exc: BaseException) -> str:
    """One phrase for a :data:`ZIP_ERRORS` exception."""
    if isinstance(exc, UnicodeDecodeError):
        return (
            f"a member name is flagged as UTF-8 but byte 0x{exc.object[exc.start]:02x} at "
            f"position {exc.start} of the name is not valid UTF-8"
        )
    if isinstance(exc, NotImplementedError):
        return f"it needs a zip feature NNEditor does not read: {exc}"
    return str(exc) or type(exc).__name__


@dataclass(frozen=True, slots=True)
class ZipMember:
    """One central-directory entry."""

    name: str
    compress_type: int
    compress_size: int
    file_size: int
    header_offset: int
    crc: int
    flag_bits: int

    @property
    def stored(self) -> bool:
        return self.compress_type == zipfile.ZIP_STORED


class _SourceFile(io.RawIOBase):
    """A read-only, seekable file object over a ByteSource (for zipfile's directory parse)."""

    def __init__(self, source: ByteSource) -> None:
        self._source = source
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._source.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        n = max(0, min(len(buffer), self._source.size - self._pos))
        if n:
            memoryview(buffer).cast("B")[:n] = self._source.view(self._pos, n)
            self._pos += n
        return n


class InflatedSource(ByteSource):
    """A compressed member, inflated into memory on first access (size-capped)."""

    def __init__(self, archive: ZipArchive, member: ZipMember) -> None:
        self._archive = archive
        self.member = member
        self.size = member.file_size
        self.path = archive.source.path
        self.label = f"{archive.label}:{member.name}"
        self._data: memoryview | None = None

    def view(self, offset: int, length: int) -> memoryview:
        self.check_range(offset, length, f"data of zip member {self.member.name!r}")
        if self._data is None:
            self._data = memoryview(self._archive.inflate(self.member))
        return self._data[offset : offset + length]


class ZipArchive:
    """The members of a zip archive held in a ByteSource.

    Attributes:
        source: the archive's bytes.
        label: name used in error messages (the file path).
        members: name -> :class:`ZipMember`, in central-directory order.
    """

    def __init__(self, source: ByteSource, label: str | None = None) -> None:
        self.source = source
        self.label = label or source.label
        try:
            self._zip = zipfile.ZipFile(_SourceFile(source))
            infos = self._zip.infolist()
        except ZIP_ERRORS as exc:
            raise ArtifactError(
                f"the zip central directory cannot be read ({zip_problem(exc)})",
                path=self.label,
                hint="the file is truncated, corrupt or not a zip archive",
            ) from exc
        self.members: dict[str, ZipMember] = {}
        for info in infos:
            if info.filename in self.members:
                raise ArtifactError(
                    f"the archive has more than one member named {info.filename!r}; "
                    "NNEditor refuses ambiguous archives",
                    path=self.label,
                )
            self.members[info.filename] = ZipMember(
                name=info.filename,
                compress_type=info.compress_type,
                compress_size=info.compress_size,
                file_size=info.file_size,
                header_offset=info.header_offset,
                crc=info.CRC,
                flag_bits=info.flag_bits,
            )

    def names(self) -> list[str]:
        return list(self.members)

    def __contains__(self, name: object) -> bool:
        return name in self.members

    def member(self, name: str) -> ZipMember:
        try:
            return self.members[name]
        except KeyError:
            raise ArtifactError(
                f"the archive has no member named {name!r}", path=self.label
            ) from None

    def data_offset(self, member: ZipMember) -> int:
        """Offset of the member's (compressed) data, from its local file header."""
        where = member.header_offset
        if member.flag_bits & 0x1:
            raise ArtifactError(
                f"zip member {member.name!r} is encrypted", path=self.label, offset=where
            )
        if where < 0 or where + _LOCAL_HEADER.size > self.source.size:
            raise ArtifactError(
                f"the local header of zip member {member.name!r} lies outside the "
                f"{self.source.size}-byte file",
                path=self.label,
                offset=where,
            )
        fields = _LOCAL_HEADER.unpack(self.source.view(where, _LOCAL_HEADER.size))
        magic, name_len, extra_len = fields[0], fields[9], fields[10]
        if magic != _LOCAL_MAGIC:
            raise ArtifactError(
                f"zip member {member.name!r} has no local file header where the central "
                "directory says it starts",
                path=self.label,
                offset=where,
            )
        start = where + _LOCAL_HEADER.size + name_len + extra_len
        if start + member.compress_size > self.source.size:
            raise ArtifactError(
                f"zip member {member.name!r} ({member.compress_size} bytes at offset {start}) "
                f"runs past the end of the {self.source.size}-byte file",
                path=self.label,
                offset=start,
            )
        return start

    def open(self, name: str) -> ByteSource:
        """The member's bytes: a zero-copy SubSource when stored, a lazy inflater otherwise."""
        member = self.member(name)
        start = self.data_offset(member)
        if member.stored:
            if member.file_size != member.compress_size:
                raise ArtifactError(
                    f"stored zip member {member.name!r} declares {member.file_size} bytes but "
                    f"occupies {member.compress_size}",
                    path=self.label,
                    offset=start,
                )
            return SubSource(self.source, start, member.file_size, f"{self.label}:{name}")
        return InflatedSource(self, member)

    def read(self, name: str, limit: int = MAX_INFLATE) -> bytes:
        """A whole (small) member as bytes, refusing members larger than ``limit``."""
        member = self.member(name)
        if member.file_size > limit:
            raise ArtifactError(
                f"zip member {name!r} declares {member.file_size} bytes, more than the "
                f"{limit}-byte limit for this kind of member",
                path=self.label,
            )
        src = self.open(name)
        return src.read(0, src.size)

    def inflate(self, member: ZipMember) -> bytes:
        """Decompress a member whose declared size is below MAX_INFLATE (CRC-checked)."""
        if member.file_size > MAX_INFLATE:
            raise ArtifactError(
                f"compressed zip member {member.name!r} declares {member.file_size} bytes; "
                f"NNEditor inflates at most {MAX_INFLATE} bytes into memory",
                path=self.label,
                hint="store large members uncompressed (torch.save does)",
            )
        self.data_offset(member)  # bounds and header checks first
        try:
            with self._zip.open(member.name) as fh:
                data = fh.read(member.file_size + 1)
        except (zlib.error, lzma.LZMAError) as exc:
            raise ArtifactError(
                f"compressed zip member {member.name!r} is corrupt ({exc})", path=self.label
            ) from exc
        except (*ZIP_ERRORS, RuntimeError) as exc:
            raise ArtifactError(
                f"compressed zip member {member.name!r} cannot be inflated ({zip_problem(exc)})",
                path=self.label,
            ) from exc
        if len(data) != member.file_size:
            raise ArtifactError(
                f"compressed zip member {member.name!r} inflates to {len(data)} bytes, not the "
                f"declared {member.file_size}",
                path=self.label,
            )
        return data


def is_zip(source: ByteSource) -> bool:
    """True when the source starts like a zip archive (a local header or an empty archive)."""
    if source.size < 4:
        return False
    head = bytes(source.view(0, 4))
    return head == _LOCAL_MAGIC or (head == b"PK\x05\x06" and source.size == 22)
