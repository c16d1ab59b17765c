"""Codecs for common types the ledger cannot record by itself, used on request.

A durable run records every value a step returns (and a flow's shared store
after every node), and the ledger only holds data: JSON, bytes and the types
:mod:`stalwart.core.codec` knows. A program whose steps return NumPy arrays,
pandas DataFrames or PIL images asks for their codecs by name::

    import stalwart.codecs
    stalwart.codecs.use("numpy", "pandas", "pil")

(``stalwart run PROGRAM.py --codec numpy`` does the same for a PocketFlow
program). Each is registered with :func:`stalwart.register_codec`, so a row
names it and reading a row back never imports anything the program did not
ask for. What each records:

* ``numpy``: an array (and a NumPy scalar) as the bytes of NumPy's own
  ``.npy`` format, written and read with ``allow_pickle=False``: an array of
  Python objects is refused, since reading one back would unpickle. So is a
  subclass of the array (a masked array, a matrix), which would come back
  as a plain array behaving otherwise; likewise a subclass of a DataFrame
  or a Series below.
* ``pandas``: a DataFrame or a Series column by column. Numbers, booleans,
  naive datetimes and timedeltas as ``.npy`` bytes with their exact dtype;
  text, nullable and other columns whose values are JSON as a list with their
  dtype's name; categoricals as codes and categories. The index likewise
  (a ``RangeIndex`` as its range). A column of any other kind (time zones,
  periods, intervals, Python objects) and a ``MultiIndex`` are refused,
  naming the column: register a codec of your own for them.
* ``pil``: an image as PNG bytes (lossless; the mode is kept, as PNG keeps
  it). A row is read back as PNG only, whatever other formats Pillow knows.

The packages are the program's own (``pip install numpy pandas pillow``, or
the ``stalwart[codecs]`` extra); this module imports one only when its codec
is asked for.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import Any

from .core.codec import register_codec
from .core.errors import SerializationError

__all__ = ["AVAILABLE", "use"]


def use(*names: str) -> None:
    """Register the codecs named: any of ``"numpy"``, ``"pandas"``, ``"pil"``.

    Raises ValueError for any other name, and ImportError naming the package
    to install when the type's package is missing. Asking twice is harmless.
    """
    unknown = [n for n in names if n not in _SHIPPED]
    if unknown:
        raise ValueError(
            f"no codec named {', '.join(map(repr, unknown))}; the codecs are {', '.join(AVAILABLE)}"
        )
    for name in names:
        _SHIPPED[name]()


def _imported(module: str, package: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"the {package!r} codec needs the {package} package: pip install {package}"
        ) from exc


# -- numpy ---------------------------------------------------------------------------


def _numpy() -> None:
    np = _imported("numpy", "numpy")

    def to_data(value: Any) -> bytes:
        if isinstance(value, np.ndarray) and type(value) is not np.ndarray:
            _subclass(value, "np.asarray(value)", "a plain array")
        return _npy(np, np.asarray(value), "a NumPy array")

    def array(data: Any) -> Any:
        return np.load(io.BytesIO(_bytes(data)), allow_pickle=False)

    def scalar(data: Any) -> Any:
        return array(data)[()]

    register_codec(np.ndarray, to_data, array, name="numpy.ndarray")
    register_codec(np.generic, to_data, scalar, name="numpy.scalar")


def _npy(np: Any, values: Any, what: str) -> bytes:
    if values.dtype.hasobject:
        raise SerializationError(
            f"{what} of Python objects (dtype {values.dtype}) cannot be recorded: reading it "
            "back would unpickle; convert it to numbers or text first"
        )
    buf = io.BytesIO()
    np.save(buf, values, allow_pickle=False)
    return buf.getvalue()


def _subclass(value: Any, convert: str, base: str) -> None:
    """Refuse a subclass of a type a shipped codec records: it would be read
    back as ``base``, whose behaviour differs (a masked array's mask, a
    matrix's ``*``), so a replay would compute other results than the run."""
    cls = type(value)
    raise SerializationError(
        f"a {cls.__module__}.{cls.__qualname__} is not recorded: it would be read back as "
        f"{base}, without what makes it a {cls.__qualname__}; record {convert} "
        "instead, or register a codec of your own for it (stalwart.register_codec)"
    )


def _bytes(data: Any) -> bytes:
    if not isinstance(data, bytes):
        raise ValueError(f"expected bytes, found a {type(data).__name__}")
    return data


# -- pandas --------------------------------------------------------------------------

# dtype kinds kept as .npy bytes: bool, integers, floats, complex, datetime, timedelta.
_NPY_KINDS = frozenset("biufcmM")
# The dtypes a column recorded as a list of values may name: pandas' own
# nullable numbers and booleans, its Python-backed text, and objects.
_LISTED_DTYPE = re.compile(
    r"U?Int(8|16|32|64)|Float(32|64)|boolean|str|string|string\[python\]|object"
)


def _pandas() -> None:
    pd = _imported("pandas", "pandas")
    np = _imported("numpy", "numpy")

    def column(values: Any, where: str) -> dict[str, Any]:
        dtype = values.dtype
        if isinstance(dtype, pd.CategoricalDtype):
            cats = column(pd.Series(dtype.categories), f"{where} (its categories)")
            return {
                "cat": cats,
                "codes": _npy(np, np.asarray(pd.Categorical(values).codes), where),
                "ordered": bool(dtype.ordered),
            }
        if isinstance(dtype, np.dtype) and dtype.kind in _NPY_KINDS:
            return {"npy": _npy(np, np.asarray(values), where)}
        if isinstance(dtype, (pd.DatetimeTZDtype, pd.PeriodDtype, pd.IntervalDtype)):
            raise SerializationError(
                f"{where}: a column of dtype {dtype} is not recorded "
                "(register a codec of your own for it: stalwart.register_codec)"
            )
        items = [
            None if _missing(pd, v) else v.item() if isinstance(v, np.generic) else v
            for v in values
        ]
        bad = next((v for v in items if not isinstance(v, (str, int, float, bool, type(None)))), 0)
        if bad != 0:
            raise SerializationError(
                f"{where}: its dtype {dtype} holds a value of type {type(bad).__qualname__}, "
                "not text or a number (register a codec of your own for it: "
                "stalwart.register_codec)"
            )
        return {"dtype": str(dtype), "values": items}

    def column_back(data: dict[str, Any]) -> Any:
        if "cat" in data:
            cats = column_back(data["cat"])
            codes = np.load(io.BytesIO(_bytes(data["codes"])), allow_pickle=False)
            return pd.Categorical.from_codes(codes, categories=cats, ordered=data["ordered"])
        if "npy" in data:
            return np.load(io.BytesIO(_bytes(data["npy"])), allow_pickle=False)
        dtype = data["dtype"]
        if not isinstance(dtype, str) or not _LISTED_DTYPE.fullmatch(dtype):
            # A row names the dtype; only those this codec writes are read, so
            # no row can make pandas load another package (pyarrow's dtypes).
            raise ValueError(f"a column of dtype {str(dtype)[:100]!r} is not one this codec writes")
        return pd.array(data["values"], dtype=dtype)

    def index(idx: Any, where: str) -> dict[str, Any]:
        if isinstance(idx, pd.MultiIndex):
            raise SerializationError(
                f"{where}: a MultiIndex is not recorded (reset_index() first, or register "
                "a codec of your own: stalwart.register_codec)"
            )
        if isinstance(idx, pd.RangeIndex):
            return {"range": [idx.start, idx.stop, idx.step], "name": idx.name}
        return {"values": column(idx, f"{where} (the index)"), "name": idx.name}

    def index_back(data: dict[str, Any]) -> Any:
        if "range" in data:
            return pd.RangeIndex(*data["range"], name=data["name"])
        return pd.Index(column_back(data["values"]), name=data["name"])

    def frame(df: Any) -> dict[str, Any]:
        if type(df) is not pd.DataFrame:
            _subclass(df, "pd.DataFrame(value)", "a DataFrame")
        if not df.columns.is_unique:
            raise SerializationError("a DataFrame with repeated column names is not recorded")
        return {
            "index": index(df.index, "the DataFrame"),
            "columns": index(df.columns, "the DataFrame's columns"),
            "data": [column(df[c], f"column {c!r} of the DataFrame") for c in df.columns],
        }

    def frame_back(data: dict[str, Any]) -> Any:
        columns = index_back(data["columns"])
        values = {i: column_back(c) for i, c in enumerate(data["data"])}
        df = pd.DataFrame(values, index=index_back(data["index"]))
        df.columns = columns
        return df

    def series(s: Any) -> dict[str, Any]:
        if type(s) is not pd.Series:
            _subclass(s, "pd.Series(value)", "a Series")
        return {
            "index": index(s.index, "the Series"),
            "data": column(s, "the Series"),
            "name": s.name,
        }

    def series_back(data: dict[str, Any]) -> Any:
        return pd.Series(
            column_back(data["data"]), index=index_back(data["index"]), name=data["name"]
        )

    register_codec(pd.DataFrame, frame, frame_back, name="pandas.DataFrame")
    register_codec(pd.Series, series, series_back, name="pandas.Series")


def _missing(pd: Any, value: Any) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # an array-like value: not a missing one
        return False


# -- PIL -----------------------------------------------------------------------------


def _pil() -> None:
    image = _imported("PIL.Image", "pillow")

    def to_data(img: Any) -> bytes:
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        return buf.getvalue()

    def from_data(data: Any) -> Any:
        img = image.open(io.BytesIO(_bytes(data)), formats=["PNG"])
        img.load()
        return img

    register_codec(image.Image, to_data, from_data, name="PIL.Image")


_SHIPPED: dict[str, Callable[[], None]] = {"numpy": _numpy, "pandas": _pandas, "pil": _pil}

#: The names :func:`use` knows.
AVAILABLE = tuple(_SHIPPED)
