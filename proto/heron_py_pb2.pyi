from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ServerHello(_message.Message):
    __slots__ = ("nonce", "server_role")
    NONCE_FIELD_NUMBER: _ClassVar[int]
    SERVER_ROLE_FIELD_NUMBER: _ClassVar[int]
    nonce: bytes
    server_role: str
    def __init__(self, nonce: _Optional[bytes] = ..., server_role: _Optional[str] = ...) -> None: ...

class ClientHello(_message.Message):
    __slots__ = ("nonce", "role", "peer_id", "mac")
    NONCE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    PEER_ID_FIELD_NUMBER: _ClassVar[int]
    MAC_FIELD_NUMBER: _ClassVar[int]
    nonce: bytes
    role: str
    peer_id: str
    mac: bytes
    def __init__(self, nonce: _Optional[bytes] = ..., role: _Optional[str] = ..., peer_id: _Optional[str] = ..., mac: _Optional[bytes] = ...) -> None: ...

class ServerAuth(_message.Message):
    __slots__ = ("mac",)
    MAC_FIELD_NUMBER: _ClassVar[int]
    mac: bytes
    def __init__(self, mac: _Optional[bytes] = ...) -> None: ...

class AuthFailed(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class RegisterInstanceRequest(_message.Message):
    __slots__ = ("task_id", "component", "pid")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    component: str
    pid: int
    def __init__(self, task_id: _Optional[int] = ..., component: _Optional[str] = ..., pid: _Optional[int] = ...) -> None: ...

class RegisterInstanceResponse(_message.Message):
    __slots__ = ("ok", "error", "pplan_json")
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PPLAN_JSON_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    error: str
    pplan_json: bytes
    def __init__(self, ok: _Optional[bool] = ..., error: _Optional[str] = ..., pplan_json: _Optional[bytes] = ...) -> None: ...

class NewPhysicalPlan(_message.Message):
    __slots__ = ("pplan_json",)
    PPLAN_JSON_FIELD_NUMBER: _ClassVar[int]
    pplan_json: bytes
    def __init__(self, pplan_json: _Optional[bytes] = ...) -> None: ...

class InstanceReady(_message.Message):
    __slots__ = ("task_id", "pid")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    pid: int
    def __init__(self, task_id: _Optional[int] = ..., pid: _Optional[int] = ...) -> None: ...

class StmgrHello(_message.Message):
    __slots__ = ("container",)
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    container: int
    def __init__(self, container: _Optional[int] = ...) -> None: ...

class InstanceInfo(_message.Message):
    __slots__ = ("task_id", "pid", "ready")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    pid: int
    ready: bool
    def __init__(self, task_id: _Optional[int] = ..., pid: _Optional[int] = ..., ready: _Optional[bool] = ...) -> None: ...

class RegisterStmgrRequest(_message.Message):
    __slots__ = ("container", "host", "port", "pid", "instances")
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    container: int
    host: str
    port: int
    pid: int
    instances: _containers.RepeatedCompositeFieldContainer[InstanceInfo]
    def __init__(self, container: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., pid: _Optional[int] = ..., instances: _Optional[_Iterable[_Union[InstanceInfo, _Mapping]]] = ...) -> None: ...

class RegisterStmgrResponse(_message.Message):
    __slots__ = ("ok", "error")
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    error: str
    def __init__(self, ok: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class StmgrHeartbeat(_message.Message):
    __slots__ = ("container", "instances")
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    container: int
    instances: _containers.RepeatedCompositeFieldContainer[InstanceInfo]
    def __init__(self, container: _Optional[int] = ..., instances: _Optional[_Iterable[_Union[InstanceInfo, _Mapping]]] = ...) -> None: ...

class AdminRequest(_message.Message):
    __slots__ = ("command",)
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    command: str
    def __init__(self, command: _Optional[str] = ...) -> None: ...

class AdminResponse(_message.Message):
    __slots__ = ("ok", "message", "status_json")
    OK_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STATUS_JSON_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    message: str
    status_json: bytes
    def __init__(self, ok: _Optional[bool] = ..., message: _Optional[str] = ..., status_json: _Optional[bytes] = ...) -> None: ...

class BackPressure(_message.Message):
    __slots__ = ("container", "start", "cause")
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    container: int
    start: bool
    cause: str
    def __init__(self, container: _Optional[int] = ..., start: _Optional[bool] = ..., cause: _Optional[str] = ...) -> None: ...
