"""The codecs shipped for NumPy, pandas and PIL (`stalwart.codecs.use`): each
value comes back equal, with its exact type and dtype; what cannot come back
equal, or would need unpickling, is refused naming where it is."""

from __future__ import annotations

import json

import pytest

import stalwart.codecs
from stalwart.core import codec
from stalwart.core.errors import CorruptedRecord, SerializationError

np = pytest.importorskip("numpy")
pd = pytest.importorskip("pandas")
Image = pytest.importorskip("PIL.Image")

stalwart.codecs.use("numpy", "pandas", "pil")


def round_trip(value: object) -> object:
    return codec.loads(codec.dumps(value, "result of step 1"), "result of step 1")


def test_arrays_come_back_with_their_shape_and_dtype() -> None:
    for array in (
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.array([True, False]),
        np.array(["2024-01-01", "2024-06-30"], dtype="datetime64[D]"),
        np.array(["ab", "c"]),
        np.zeros((0, 2), dtype=np.int16),
    ):
        back = round_trip(array)
        assert isinstance(back, np.ndarray)
        assert back.dtype == array.dtype and back.shape == array.shape
        assert (back == array).all()


def test_numpy_scalars_keep_their_type() -> None:
    for scalar in (np.int64(5), np.float32(1.5), np.bool_(True)):
        back = round_trip(scalar)
        assert type(back) is type(scalar) and back == scalar


def test_an_array_of_python_objects_is_refused_rather_than_pickled() -> None:
    with pytest.raises(SerializationError) as caught:
        codec.dumps({"rows": np.array([object()])}, "result of step 1")
    assert str(caught.value).startswith("result of step 1['rows']: a NumPy array of Python objects")
    assert "unpickle" in str(caught.value)


def test_a_dataframe_comes_back_equal_column_by_column() -> None:
    df = pd.DataFrame(
        {
            "n": [1, 2, 3],
            "x": [1.5, None, 3.0],
            "text": ["a", "b", None],
            "when": pd.to_datetime(["2024-01-01", "2024-02-01", "2024-03-01"]),
            "ok": [True, False, True],
            "level": pd.Categorical(["lo", "hi", "lo"], categories=["lo", "hi"], ordered=True),
            "maybe": pd.array([1, None, 3], dtype="Int64"),
            7: [0.1, 0.2, 0.3],
        },
        index=pd.Index(["r1", "r2", "r3"], name="row"),
    )
    back = round_trip(df)
    pd.testing.assert_frame_equal(back, df)


def test_a_series_and_a_range_index_come_back_equal() -> None:
    series = pd.Series([3, 1, 2], name="scores")
    back = round_trip(series)
    pd.testing.assert_series_equal(back, series)
    assert isinstance(back.index, pd.RangeIndex)


def test_columns_that_would_not_come_back_equal_are_refused_naming_the_column() -> None:
    aware = pd.DataFrame({"t": pd.to_datetime(["2024-01-01"]).tz_localize("UTC")})
    with pytest.raises(SerializationError, match=r"column 't' of the DataFrame: .*UTC"):
        codec.dumps(aware)
    objects = pd.DataFrame({"o": [object()]})
    with pytest.raises(SerializationError, match=r"column 'o' of the DataFrame: .*object"):
        codec.dumps(objects)
    multi = pd.DataFrame({"v": [1]}, index=pd.MultiIndex.from_tuples([("a", 1)]))
    with pytest.raises(SerializationError, match="MultiIndex"):
        codec.dumps(multi)


def test_an_image_comes_back_as_the_same_pixels_and_mode() -> None:
    img = Image.new("RGBA", (4, 3), (10, 20, 30, 40))
    img.putpixel((1, 1), (255, 0, 0, 255))
    back = round_trip(img)
    assert back.mode == "RGBA" and back.size == (4, 3)
    assert back.tobytes() == img.tobytes()


def test_an_image_row_is_read_as_png_only() -> None:
    gif = Image.new("P", (2, 2))
    import io

    buf = io.BytesIO()
    gif.save(buf, format="GIF")
    row = codec.dumps(buf.getvalue())  # bytes, written under the image codec's name
    tagged = json.dumps({"$t": "codec", "c": "PIL.Image", "v": json.loads(row)})
    with pytest.raises(Exception, match="cannot be read back"):
        codec.loads(tagged)


def test_an_unknown_codec_name_is_refused_with_the_names_there_are() -> None:
    names = "no codec named 'arrow'; the codecs are numpy, pandas, pil"
    with pytest.raises(ValueError, match=names):
        stalwart.codecs.use("arrow")


def test_a_value_of_a_shipped_kind_says_which_codec_to_ask_for() -> None:
    # In a process that did not ask for the codecs, a DataFrame's error names
    # the codec to ask for; a pandas type no codec records does not.
    import subprocess
    import sys

    program = (
        "import pandas as pd\n"
        "from stalwart.core import codec\n"
        "for value in (pd.DataFrame({'a': [1]}), pd.Interval(0, 1)):\n"
        "    try:\n"
        "        codec.dumps(value)\n"
        "    except Exception as exc:\n"
        "        print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True
    )
    frame, interval = done.stdout.splitlines()
    assert "pandas.DataFrame cannot be recorded as JSON" in frame
    assert "stalwart.codecs.use('pandas'), or stalwart run --codec pandas" in frame
    assert "codecs.use" not in interval and "stalwart.register_codec" in interval


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_an_array_subclass_is_refused_rather_than_read_back_as_a_plain_array() -> None:
    # A masked array read back as a plain one would show its masked values,
    # and a matrix's * would multiply element by element: a replay would
    # compute other results than the live run did.
    for array, kind in (
        (np.ma.masked_array([1, 2, 3], mask=[False, True, False]), "MaskedArray"),
        (np.matrix([[1, 2], [3, 4]]), "matrix"),
    ):
        with pytest.raises(SerializationError) as caught:
            codec.dumps({"a": array}, "result of step 1")
        message = str(caught.value)
        assert message.startswith("result of step 1['a']: ")
        assert kind in message and "np.asarray" in message


def test_a_dataframe_subclass_is_refused_rather_than_read_back_as_a_dataframe() -> None:
    class Prices(pd.DataFrame):  # type: ignore[misc]
        pass

    with pytest.raises(SerializationError, match="Prices"):
        codec.dumps(Prices({"p": [1.0]}), "result of step 1")


def test_a_row_naming_a_dtype_this_codec_never_writes_is_refused() -> None:
    row = json.loads(codec.dumps(pd.DataFrame({"n": pd.array([1, None], dtype="Int64")})))
    assert row["v"]["data"][0]["dtype"] == "Int64"
    row["v"]["data"][0]["dtype"] = "string[pyarrow]"  # would make pandas import pyarrow
    with pytest.raises(CorruptedRecord, match=r"dtype 'string\[pyarrow\]' is not one this codec"):
        codec.loads(json.dumps(row), "result of step 1")


def test_every_hint_names_a_codec_that_records_the_value() -> None:
    # The core's hints (which codec records which type) and stalwart.codecs
    # (what each codec registers) are two tables: they must agree, type by type.
    import subprocess
    import sys

    program = (
        "import re, numpy as np, pandas as pd\n"
        "from PIL import Image\n"
        "import stalwart.codecs\n"
        "from stalwart.core import codec\n"
        "values = [np.zeros(2), np.float32(1), pd.DataFrame({'a': [1]}),\n"
        "          pd.Series([1]), Image.new('L', (1, 1))]\n"
        "named = []\n"
        "for value in values:\n"
        "    try:\n"
        "        codec.dumps(value)\n"
        "    except Exception as exc:\n"
        "        named.append(re.search(r\"codecs.use\\('(\\w+)'\\)\", str(exc)).group(1))\n"
        "stalwart.codecs.use(*named)\n"
        "for value in values:\n"
        "    codec.dumps(value)\n"
        "print(' '.join(named))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["numpy", "numpy", "pandas", "pandas", "pil"]
    assert set(done.stdout.split()) == set(stalwart.codecs.AVAILABLE)
