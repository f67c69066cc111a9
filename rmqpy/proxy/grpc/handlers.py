"""The method handlers of ``apache.rocketmq.v2.MessagingService`` for grpcio's asyncio server.

Built from the service's descriptor rather than the generated ``add_MessagingServiceServicer_to_server``
for two reasons:

* a request that is not a valid protobuf ends the call with INTERNAL, as grpc-java (the proxy) and
  grpcio's synchronous server answer it; grpcio's asyncio server answers a deserializer's exception
  with UNKNOWN. Here the deserializer hands the servicer a :class:`Malformed` instead, and the call is
  aborted with INTERNAL (one rate-limited log line, no traceback);
* SendMessage has its own deserializer (:mod:`rmqpy.proxy.grpc.large`).

Only the methods the servicer defines are served; the others (PullMessage, UpdateOffset, GetOffset,
QueryOffset, SyncLiteSubscription) end UNIMPLEMENTED with grpc-java's text, as the proxy (5.3.3 and
5.4.0, which do not serve them either) answers them.
"""
from __future__ import annotations

from typing import Any, AsyncIterator, Callable

import grpc
from rocketmq.grpc_protocol import service_pb2 as spb

SERVICE = "apache.rocketmq.v2.MessagingService"
#: what grpcio's synchronous server said of a request it could not decode
MALFORMED = "Exception deserializing request!"


class Malformed:
    """A request the deserializer could not decode, and why."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


def tolerant(decode: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def deserialize(raw: bytes) -> Any:
        try:
            return decode(raw)
        except Exception as exc:  # noqa: BLE001 (protobuf's DecodeError, or the cut's ValueError)
            return Malformed(exc)
    return deserialize


def _unary(fn: Callable[..., Any], report: Callable[[str, Malformed], None], name: str) -> Callable[..., Any]:
    async def handle(request: Any, context: Any) -> Any:
        if isinstance(request, Malformed):
            report(name, request)
            await context.abort(grpc.StatusCode.INTERNAL, MALFORMED)
        return await fn(request, context)
    return handle


def _server_stream(fn: Callable[..., Any], report: Callable[[str, Malformed], None],
                   name: str) -> Callable[..., Any]:
    async def handle(request: Any, context: Any) -> AsyncIterator[Any]:
        if isinstance(request, Malformed):
            report(name, request)
            await context.abort(grpc.StatusCode.INTERNAL, MALFORMED)
        async for response in fn(request, context):
            yield response
    return handle


def _bidi_stream(fn: Callable[..., Any], report: Callable[[str, Malformed], None],
                 name: str) -> Callable[..., Any]:
    async def handle(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async def checked() -> AsyncIterator[Any]:
            async for request in requests:
                if isinstance(request, Malformed):
                    report(name, request)
                    await context.abort(grpc.StatusCode.INTERNAL, MALFORMED)
                yield request
        async for response in fn(checked(), context):
            yield response
    return handle


def unimplemented_text(name: str) -> str:
    """grpc-java's details for a method its service does not override."""
    return f"Method {SERVICE}/{name} is unimplemented"


def _unimplemented(name: str, streams: bool) -> Callable[..., Any]:
    async def handle(request: Any, context: Any) -> Any:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, unimplemented_text(name))

    async def handle_stream(request: Any, context: Any) -> AsyncIterator[Any]:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, unimplemented_text(name))
        yield None  # never reached: makes this an async generator
    return handle_stream if streams else handle


def service_handler(servicer: Any, report: Callable[[str, Malformed], None],
                    deserializers: dict[str, Callable[[bytes], Any]] | None = None) -> grpc.GenericRpcHandler:
    """The generic handler of every method ``servicer`` defines; ``deserializers`` replaces a
    method's request decoding (its failures become :class:`Malformed` too)."""
    handlers = {}
    own = _own(servicer)
    for method in spb.DESCRIPTOR.services_by_name["MessagingService"].methods:
        if method.name not in own:
            ignore = {"request_deserializer": lambda raw: None}
            if method.client_streaming:
                handlers[method.name] = grpc.stream_stream_rpc_method_handler(_unimplemented(method.name, True),
                                                                              **ignore)
            elif method.server_streaming:
                handlers[method.name] = grpc.unary_stream_rpc_method_handler(_unimplemented(method.name, True),
                                                                             **ignore)
            else:
                handlers[method.name] = grpc.unary_unary_rpc_method_handler(_unimplemented(method.name, False),
                                                                            **ignore)
            continue
        bound = getattr(servicer, method.name)
        decode = (deserializers or {}).get(method.name, getattr(spb, method.input_type.name).FromString)
        kwargs = {"request_deserializer": tolerant(decode),
                  "response_serializer": getattr(spb, method.output_type.name).SerializeToString}
        if method.client_streaming:
            handlers[method.name] = grpc.stream_stream_rpc_method_handler(
                _bidi_stream(bound, report, method.name), **kwargs)
        elif method.server_streaming:
            handlers[method.name] = grpc.unary_stream_rpc_method_handler(
                _server_stream(bound, report, method.name), **kwargs)
        else:
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(_unary(bound, report, method.name), **kwargs)
    return grpc.method_handlers_generic_handler(SERVICE, handlers)


def _own(servicer: Any) -> set[str]:
    """The methods the servicer's classes define themselves (not the generated base's UNIMPLEMENTED ones)."""
    names: set[str] = set()
    for cls in type(servicer).__mro__:
        if cls.__module__.startswith("rocketmq.") or cls is object:
            continue
        names.update(vars(cls))
    return names
