from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ServerHello(_message.Message):
    __slots__ = ("nonce", "server_role", "server_id")
    NONCE_FIELD_NUMBER: _ClassVar[int]
    SERVER_ROLE_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    nonce: bytes
    server_role: str
    server_id: str
    def __init__(self, nonce: _Optional[bytes] = ..., server_role: _Optional[str] = ..., server_id: _Optional[str] = ...) -> None: ...

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
    __slots__ = ("container", "instances", "metrics")
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    container: int
    instances: _containers.RepeatedCompositeFieldContainer[InstanceInfo]
    metrics: StmgrMetrics
    def __init__(self, container: _Optional[int] = ..., instances: _Optional[_Iterable[_Union[InstanceInfo, _Mapping]]] = ..., metrics: _Optional[_Union[StmgrMetrics, _Mapping]] = ...) -> None: ...

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

class InstanceMetrics(_message.Message):
    __slots__ = ("task_id", "emitted", "processed", "acked", "failed", "timed_out", "in_queue_batches", "in_queue_bytes", "out_queue_batches", "time_blocked_ms", "complete_latency_p50_ms", "complete_latency_p99_ms", "out_queue_bytes", "execute_latency_ms")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    EMITTED_FIELD_NUMBER: _ClassVar[int]
    PROCESSED_FIELD_NUMBER: _ClassVar[int]
    ACKED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    IN_QUEUE_BATCHES_FIELD_NUMBER: _ClassVar[int]
    IN_QUEUE_BYTES_FIELD_NUMBER: _ClassVar[int]
    OUT_QUEUE_BATCHES_FIELD_NUMBER: _ClassVar[int]
    TIME_BLOCKED_MS_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_LATENCY_P50_MS_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_LATENCY_P99_MS_FIELD_NUMBER: _ClassVar[int]
    OUT_QUEUE_BYTES_FIELD_NUMBER: _ClassVar[int]
    EXECUTE_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    emitted: int
    processed: int
    acked: int
    failed: int
    timed_out: int
    in_queue_batches: int
    in_queue_bytes: int
    out_queue_batches: int
    time_blocked_ms: int
    complete_latency_p50_ms: float
    complete_latency_p99_ms: float
    out_queue_bytes: int
    execute_latency_ms: float
    def __init__(self, task_id: _Optional[int] = ..., emitted: _Optional[int] = ..., processed: _Optional[int] = ..., acked: _Optional[int] = ..., failed: _Optional[int] = ..., timed_out: _Optional[int] = ..., in_queue_batches: _Optional[int] = ..., in_queue_bytes: _Optional[int] = ..., out_queue_batches: _Optional[int] = ..., time_blocked_ms: _Optional[int] = ..., complete_latency_p50_ms: _Optional[float] = ..., complete_latency_p99_ms: _Optional[float] = ..., out_queue_bytes: _Optional[int] = ..., execute_latency_ms: _Optional[float] = ...) -> None: ...

class StmgrMetrics(_message.Message):
    __slots__ = ("in_backpressure", "spouts_paused", "time_spent_back_pressure_ms", "backpressure_episodes", "backpressure_cause", "dropped_tuples", "buffered_bytes", "instances", "pending_roots", "auth_failures", "bad_frames", "time_spent_back_pressure_by_compid_ms")
    class BufferedBytesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class TimeSpentBackPressureByCompidMsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    IN_BACKPRESSURE_FIELD_NUMBER: _ClassVar[int]
    SPOUTS_PAUSED_FIELD_NUMBER: _ClassVar[int]
    TIME_SPENT_BACK_PRESSURE_MS_FIELD_NUMBER: _ClassVar[int]
    BACKPRESSURE_EPISODES_FIELD_NUMBER: _ClassVar[int]
    BACKPRESSURE_CAUSE_FIELD_NUMBER: _ClassVar[int]
    DROPPED_TUPLES_FIELD_NUMBER: _ClassVar[int]
    BUFFERED_BYTES_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    PENDING_ROOTS_FIELD_NUMBER: _ClassVar[int]
    AUTH_FAILURES_FIELD_NUMBER: _ClassVar[int]
    BAD_FRAMES_FIELD_NUMBER: _ClassVar[int]
    TIME_SPENT_BACK_PRESSURE_BY_COMPID_MS_FIELD_NUMBER: _ClassVar[int]
    in_backpressure: bool
    spouts_paused: bool
    time_spent_back_pressure_ms: int
    backpressure_episodes: int
    backpressure_cause: str
    dropped_tuples: int
    buffered_bytes: _containers.ScalarMap[str, int]
    instances: _containers.RepeatedCompositeFieldContainer[InstanceMetrics]
    pending_roots: int
    auth_failures: int
    bad_frames: int
    time_spent_back_pressure_by_compid_ms: _containers.ScalarMap[str, int]
    def __init__(self, in_backpressure: _Optional[bool] = ..., spouts_paused: _Optional[bool] = ..., time_spent_back_pressure_ms: _Optional[int] = ..., backpressure_episodes: _Optional[int] = ..., backpressure_cause: _Optional[str] = ..., dropped_tuples: _Optional[int] = ..., buffered_bytes: _Optional[_Mapping[str, int]] = ..., instances: _Optional[_Iterable[_Union[InstanceMetrics, _Mapping]]] = ..., pending_roots: _Optional[int] = ..., auth_failures: _Optional[int] = ..., bad_frames: _Optional[int] = ..., time_spent_back_pressure_by_compid_ms: _Optional[_Mapping[str, int]] = ...) -> None: ...

class StartCheckpoint(_message.Message):
    __slots__ = ("checkpoint_id",)
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    checkpoint_id: int
    def __init__(self, checkpoint_id: _Optional[int] = ...) -> None: ...

class CheckpointSaved(_message.Message):
    __slots__ = ("checkpoint_id", "task_id", "size_bytes", "duration_secs", "failed", "error", "stored")
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    DURATION_SECS_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STORED_FIELD_NUMBER: _ClassVar[int]
    checkpoint_id: int
    task_id: int
    size_bytes: int
    duration_secs: float
    failed: bool
    error: str
    stored: bool
    def __init__(self, checkpoint_id: _Optional[int] = ..., task_id: _Optional[int] = ..., size_bytes: _Optional[int] = ..., duration_secs: _Optional[float] = ..., failed: _Optional[bool] = ..., error: _Optional[str] = ..., stored: _Optional[bool] = ...) -> None: ...

class RestoreState(_message.Message):
    __slots__ = ("restore_id", "checkpoint_id", "reason")
    RESTORE_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    restore_id: int
    checkpoint_id: int
    reason: str
    def __init__(self, restore_id: _Optional[int] = ..., checkpoint_id: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class StateRestored(_message.Message):
    __slots__ = ("restore_id", "task_id", "ok", "error")
    RESTORE_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    restore_id: int
    task_id: int
    ok: bool
    error: str
    def __init__(self, restore_id: _Optional[int] = ..., task_id: _Optional[int] = ..., ok: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class StartProcessing(_message.Message):
    __slots__ = ("restore_id",)
    RESTORE_ID_FIELD_NUMBER: _ClassVar[int]
    restore_id: int
    def __init__(self, restore_id: _Optional[int] = ...) -> None: ...

class RestoreFence(_message.Message):
    __slots__ = ("container", "restore_id")
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    RESTORE_ID_FIELD_NUMBER: _ClassVar[int]
    container: int
    restore_id: int
    def __init__(self, container: _Optional[int] = ..., restore_id: _Optional[int] = ...) -> None: ...

class RollbackRequest(_message.Message):
    __slots__ = ("container", "restore_id", "reason")
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    RESTORE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    container: int
    restore_id: int
    reason: str
    def __init__(self, container: _Optional[int] = ..., restore_id: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class CheckpointCommitted(_message.Message):
    __slots__ = ("checkpoint_id",)
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    checkpoint_id: int
    def __init__(self, checkpoint_id: _Optional[int] = ...) -> None: ...

class RollbackAnswer(_message.Message):
    __slots__ = ("restore_id", "acted", "reason")
    RESTORE_ID_FIELD_NUMBER: _ClassVar[int]
    ACTED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    restore_id: int
    acted: bool
    reason: str
    def __init__(self, restore_id: _Optional[int] = ..., acted: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class DrainRequest(_message.Message):
    __slots__ = ("drain_id", "quiet_ms")
    DRAIN_ID_FIELD_NUMBER: _ClassVar[int]
    QUIET_MS_FIELD_NUMBER: _ClassVar[int]
    drain_id: int
    quiet_ms: int
    def __init__(self, drain_id: _Optional[int] = ..., quiet_ms: _Optional[int] = ...) -> None: ...

class Drained(_message.Message):
    __slots__ = ("container", "drain_id", "pending")
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    DRAIN_ID_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    container: int
    drain_id: int
    pending: int
    def __init__(self, container: _Optional[int] = ..., drain_id: _Optional[int] = ..., pending: _Optional[int] = ...) -> None: ...
