"""One SQL statement on the warehouse's `blockheat serve` over Spark Connect's gRPC API, without pyspark's client.

pyspark's Connect client imports pandas and the whole of pyspark (about a second) before its first request; a
`blockheat sql` attached to a warm server answers in a fraction of that through this client. It speaks the protocol
of the installed pyspark: the message classes are built from the serialized descriptors of pyspark's generated
modules (spark/connect/*.proto), read from their files without importing them. It sets the session's settings,
runs the statement (its rows limited as DataFrame.limit() does), returns the rows as pyspark's collect() and
Row.asDict(recursive=True) give them, and releases the session. Anything else raises Unsupported, so the caller runs
the statement through pyspark's client: a result type this module does not convert (variant, user-defined,
geography, geometry; a struct with two fields of one name, which pyspark's Row keeps) and every error the server
returns (pyspark words it for the user).

    columns, rows = run("sc://127.0.0.1:15002", token, "SELECT count(*) AS n FROM requests", {}, limit=1001)
"""
from __future__ import annotations

import ast
import contextlib
import datetime as dt
import functools
import getpass
import importlib.util
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from blockheat.libs.io import arrow_values, sql_access

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Unsupported", "messages", "run", "table_rows"]

SERVICE = "/spark.connect.SparkConnectService/"
CLIENT_TYPE = "blockheat"
# Spark data types (DataType.kind) whose values pyspark's collect() builds into its own classes.
_UNCONVERTED_KINDS = frozenset({"variant", "udt", "geography", "geometry", "unparsed"})
_SETUP_TIMEOUT_S = 30.0
_RELEASE_TIMEOUT_S = 2.0


class Unsupported(Exception):
    """The statement cannot be answered here (a result type, a server error): run it through pyspark's client."""


@functools.cache
def messages() -> SimpleNamespace:
    """The Spark Connect message classes this client uses, from the installed pyspark's descriptors."""
    from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise Unsupported("pyspark is not installed")
    pool = descriptor_pool.DescriptorPool()
    for known in (any_pb2, timestamp_pb2):
        pool.AddSerializedFile(known.DESCRIPTOR.serialized_pb)
    pending = [_serialized(f) for f in sorted((Path(spec.submodule_search_locations[0]) / "sql" / "connect" /
                                               "proto").glob("*_pb2.py"))]
    while pending:                                 # each file after the files it imports
        added = [blob for blob in pending if _imports_known(pool, blob, descriptor_pb2)]
        if not added:
            raise Unsupported("pyspark's Spark Connect descriptors import files it does not ship")
        for blob in added:
            pool.AddSerializedFile(blob)
        pending = [blob for blob in pending if blob not in added]
    names = ("ConfigRequest", "ConfigResponse", "ExecutePlanRequest", "ExecutePlanResponse", "ReleaseSessionRequest",
             "ReleaseSessionResponse")
    return SimpleNamespace(**{n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"spark.connect.{n}"))
                              for n in names})


def _serialized(path: Path) -> bytes:
    """The serialized FileDescriptorProto a generated module adds to protobuf's pool (its one bytes literal)."""
    text = path.read_text()
    start = text.find("AddSerializedFile(")
    end = text.find("\n)\n", start)
    if start < 0 or end < 0:
        raise Unsupported(f"{path}: no serialized descriptor")
    value = ast.literal_eval(text[start + len("AddSerializedFile("):end].strip())
    if not isinstance(value, bytes):
        raise Unsupported(f"{path}: no serialized descriptor")
    return value


def _imports_known(pool: Any, blob: bytes, descriptor_pb2: Any) -> bool:
    try:
        for name in descriptor_pb2.FileDescriptorProto.FromString(blob).dependency:
            pool.FindFileByName(name)
    except KeyError:
        return False
    return True


def run(url: str, token: str, query: str, conf: Mapping[str, str], *,
        limit: int | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    """(column names, rows) of `query` on the Spark Connect server at `url` (sc://host:port on this host), in a new
    session given `conf` first; at most `limit` rows (None: all). Unsupported as the module says."""
    import grpc

    m = messages()
    port = sql_access.connect_port(url)
    credentials = grpc.composite_channel_credentials(grpc.local_channel_credentials(),
                                                     grpc.access_token_call_credentials(token))
    channel = grpc.secure_channel(f"localhost:{port}", credentials)
    session, user = str(uuid.uuid4()), getpass.getuser()
    try:
        config = _call(channel.unary_unary, "Config", m.ConfigRequest, m.ConfigResponse)
        request = m.ConfigRequest(session_id=session, client_type=CLIENT_TYPE)
        request.user_context.user_id = user
        for key, value in conf.items():
            pair = request.operation.set.pairs.add()
            pair.key, pair.value = key, value
        config(request, timeout=_SETUP_TIMEOUT_S)
        execute = _call(channel.unary_stream, "ExecutePlan", m.ExecutePlanRequest, m.ExecutePlanResponse)
        plan = m.ExecutePlanRequest(session_id=session, client_type=CLIENT_TYPE, operation_id=str(uuid.uuid4()))
        plan.user_context.user_id = user
        root = plan.plan.root
        if limit is not None:
            root.limit.limit = limit
            root = root.limit.input
        root.sql.query = query
        responses = execute(plan)                 # the server runs the statement while pyarrow loads
        return _rows(responses)
    except grpc.RpcError as exc:
        raise Unsupported(f"the server answered {exc.code()}") from exc
    finally:
        release = _call(channel.unary_unary, "ReleaseSession", m.ReleaseSessionRequest, m.ReleaseSessionResponse)
        done = m.ReleaseSessionRequest(session_id=session, client_type=CLIENT_TYPE)
        done.user_context.user_id = user
        with contextlib.suppress(grpc.RpcError):           # the server drops an idle session itself
            release(done, timeout=_RELEASE_TIMEOUT_S)
        channel.close()


def _call(kind: Callable[..., Any], method: str, request: Any, response: Any) -> Any:
    return kind(SERVICE + method, request_serializer=request.SerializeToString,
                response_deserializer=response.FromString)


def _rows(responses: Any) -> tuple[list[str], list[dict[str, Any]]]:
    import pyarrow as pa

    batches: list[pa.RecordBatch] = []
    fields: list[str] | None = None
    for response in responses:
        if response.HasField("arrow_batch"):
            with pa.ipc.open_stream(response.arrow_batch.data) as reader:
                batches.extend(reader)
        if response.HasField("schema"):
            if _unconverted(response.schema):
                raise Unsupported("a result column of a type pyspark converts to its own classes")
            fields = [f.name for f in response.schema.struct.fields]
    if not batches:
        return fields or [], []
    table = pa.Table.from_batches(batches)
    names = fields if fields is not None and len(fields) == table.num_columns else table.column_names
    return names, table_rows(table, names)


def table_rows(table: pa.Table, names: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows of a result's Arrow table as pyspark's collect() and Row.asDict(recursive=True) give them: time-zoned
    timestamps as naive local times, structs and maps as dicts; keyed by `names` (default: the table's)."""
    values = [_column_values(table.column(i)) for i in range(table.num_columns)]
    keys = table.column_names if names is None else names
    return [dict(zip(keys, row, strict=True)) for row in zip(*values, strict=True)]


def _unconverted(data_type: Any) -> bool:
    """Whether a Spark DataType (the protocol's message) holds a type pyspark builds a class of its own for, or a
    struct whose field names repeat (the Arrow batches rename them; pyspark's rows keep the names)."""
    kind = data_type.WhichOneof("kind")
    if kind in _UNCONVERTED_KINDS:
        return True
    if kind == "struct":
        names = [f.name for f in data_type.struct.fields]
        return len(set(names)) < len(names) or any(_unconverted(f.data_type) for f in data_type.struct.fields)
    if kind == "array":
        return _unconverted(data_type.array.element_type)
    if kind == "map":
        return _unconverted(data_type.map.key_type) or _unconverted(data_type.map.value_type)
    return False


def _column_values(column: pa.ChunkedArray) -> list[Any]:
    """A column's values for table_rows(): time-zoned timestamps read as naive UTC ones (arrow_values), then made
    local."""
    values = arrow_values.utc_values(column)
    convert = _converter(column.type)
    return values if convert is None else [convert(v) for v in values]


def _converter(t: pa.DataType) -> Callable[[Any], Any] | None:
    """The conversion of one to_pylist() value of type `t` (None: kept as it is)."""
    import pyarrow as pa

    if pa.types.is_timestamp(t) and t.tz is not None:
        return lambda v: None if v is None else v.replace(tzinfo=dt.UTC).astimezone().replace(tzinfo=None)
    if pa.types.is_map(t):
        key, item = _converter(t.key_type) or _same, _converter(t.item_type) or _same
        return lambda v: None if v is None else {key(k): item(x) for k, x in v}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = _converter(t.value_type)
        return None if inner is None else lambda v: None if v is None else [inner(x) for x in v]
    if pa.types.is_struct(t):
        fields = {t.field(i).name: _converter(t.field(i).type) for i in range(t.num_fields)}
        if all(c is None for c in fields.values()):
            return None
        return lambda v: None if v is None else {k: (fields[k] or _same)(x) for k, x in v.items()}
    return None


def _same(value: Any) -> Any:
    return value
