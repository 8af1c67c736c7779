"""What every framework adapter is given: a factory of steered, recorded runs.

An adapter (the LangChain middleware, the Anthropic loop, ...) never sees ``ReasonBlocks``: it gets a
:class:`RunFactory`, built once by the facade from its configuration, and asks it for a :class:`SteeredRun` per
agent invocation: a :class:`~rb_otel.steering.session.SteeringSession` whose emitter is the run's
:class:`~rb_otel.telemetry.RunRecorder`. Steering decisions then flow one way: hook -> session -> telemetry.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rb_otel._version import __version__
from rb_otel.steering.agent_keys import agent_key
from rb_otel.steering.pilot.kinds import infer_agent_kind
from rb_otel.steering.session import SteeringSession, StepEmitter
from rb_otel.telemetry import RunInfo, RunRecorder, Telemetry
from rb_otel.types import ExperimentArm, FSMState, RunFields

__all__ = ["EXPERIMENT_KEYS", "NewSession", "RunFactory", "SteeredRun", "steered_run_of"]

#: Run metadata keys an experiment stamps (docs/experiments.md, "A/B experiments"); a caller's values for them are
#: replaced.
EXPERIMENT_KEYS = ("experiment_id", "arm", "assignment_unit", "rb_version")


class NewSession(Protocol):
    """Builds a configured :class:`SteeringSession` (the facade's ``new_session``)."""

    def __call__(
        self,
        *,
        run_id: str | None = ...,
        emitter: StepEmitter | None = ...,
        run_metadata: Mapping[str, Any] | None = ...,
        routing_ids: Mapping[FSMState, str] | None = ...,
        steer: bool = ...,
    ) -> SteeringSession: ...


@dataclass(slots=True)
class SteeredRun:
    """One invocation: its steering session and its telemetry (the session's emitter)."""

    session: SteeringSession
    recorder: RunRecorder


#: The recorder of every session a factory opened, the session held weakly: adapters given a bare session find
#: its telemetry here. (The value must not refer to its key, or the entry would keep the session alive forever.)
_RECORDERS: weakref.WeakKeyDictionary[SteeringSession, RunRecorder] = weakref.WeakKeyDictionary()


def steered_run_of(session: SteeringSession) -> SteeredRun | None:
    """The run (session and recorder) ``session`` belongs to, if a :class:`RunFactory` opened it
    (``rb.session()``, ``rb.claude_messages_session()``); ``None`` for a session built by hand."""
    recorder = _RECORDERS.get(session)
    return None if recorder is None else SteeredRun(session, recorder)


class RunFactory:
    """Opens steered, recorded runs for one configuration.

    ``model_routing`` is the caller's validated routing table (FSM state -> model id or model object), for the
    adapter to resolve in its framework's terms; ``routing_ids`` are those the session reports when the adapter
    gives none of its own.
    """

    def __init__(
        self,
        *,
        telemetry: Telemetry,
        new_session: NewSession,
        task_profile: str,
        scorer_name: str,
        model_routing: Mapping[FSMState, Any],
        routing_ids: Mapping[FSMState, str],
        agent_kind: str | None = None,
        scorer_name_for: Callable[[str, str], str] | None = None,
    ) -> None:
        self.telemetry = telemetry
        self.task_profile = task_profile
        self.scorer_name = scorer_name
        self.agent_kind = agent_kind
        self._scorer_name_for = scorer_name_for
        self.model_routing = dict(model_routing)
        self.routing_ids = dict(routing_ids)
        self._new_session = new_session

    @property
    def capture_content(self) -> bool:
        """Whether prompts, completions and tool arguments may be recorded (the content-capture policy)."""
        return self.telemetry.content.capture

    @property
    def wants_content(self) -> bool:
        """Whether adapters should hand the recorder messages: captured, or for a completion hook to upload."""
        return self.telemetry.wants_content

    def open(
        self,
        fields: RunFields,
        *,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        conversation_id: str = "",
        routing_ids: Mapping[FSMState, str] | None = None,
        experiment: ExperimentArm | None = None,
        steer: bool = True,
        links: Sequence[str] = (),
        tools: Iterable[str] | None = None,
    ) -> SteeredRun:
        """A new run (its span opens when the session starts): ``run_id`` or a fresh UUID names it; ``links``
        are the earlier parts of a run resumed in this process (their ``RunRecorder.part_id``); ``tools`` are the
        names of the agent's tools when the adapter knows them (:meth:`kind_of`).

        In an ``experiment``'s ``off`` arm the session scores and records but steers nothing (no guidance, no
        routing); the experiment, arm and unit are stamped after the caller's ``metadata``, so it cannot relabel
        them. ``steer=False`` records a run without steering it (telemetry-only adapters): scores and states, no
        guidance, no routing.
        """
        key = run_id or str(uuid.uuid4())
        extras = dict(metadata or {})
        if experiment is not None:
            extras.update(
                experiment_id=experiment.experiment_id,
                arm=experiment.arm,
                assignment_unit=experiment.unit,
                rb_version=__version__,
            )
        kind = self.kind_of(tools)
        # the key the pilot keeps this agent's baselines and learned model under (only asked of a pilot: an unnamed
        # agent's key warns)
        scored_as = agent_key(fields.agent_name, fields.model) if self._scorer_name_for is not None else ""
        info = RunInfo(
            run_id=key,
            fields=fields,
            task_profile=self.task_profile,
            conversation_id=conversation_id,
            metadata={k: v for k, v in extras.items() if k not in EXPERIMENT_KEYS},  # the span has its own
            scorer=self._scorer_name_for(kind, scored_as) if self._scorer_name_for is not None else self.scorer_name,
            experiment=experiment,
            agent_kind=kind,
            agent_key=scored_as,
        )
        recorder = self.telemetry.run(info, links=links)
        steer = steer and (experiment is None or experiment.arm == "on")
        session = self._new_session(
            run_id=key,
            emitter=recorder,
            run_metadata={
                **fields.as_dict(),
                "task_profile": self.task_profile,
                "metadata": extras,
                "agent_kind": kind,
            },
            routing_ids=self.routing_ids if routing_ids is None else routing_ids,
            steer=steer,
        )
        _RECORDERS[session] = recorder
        return SteeredRun(session, recorder)

    def kind_of(self, tools: Iterable[str] | None) -> str:
        """A run's kind of agent: the configured ``agent_kind``, else the one its tools say
        (:func:`~rb_otel.steering.pilot.kinds.infer_agent_kind`), else ``""`` (not known: the generic pilot)."""
        if self.agent_kind:
            return self.agent_kind
        return infer_agent_kind(tools) if tools is not None else ""

    def with_telemetry(self, telemetry: Telemetry) -> RunFactory:
        """The same configuration recording to ``telemetry`` (experiments force telemetry on in both arms)."""
        return RunFactory(
            telemetry=telemetry,
            new_session=self._new_session,
            task_profile=self.task_profile,
            scorer_name=self.scorer_name,
            model_routing=self.model_routing,
            routing_ids=self.routing_ids,
            agent_kind=self.agent_kind,
            scorer_name_for=self._scorer_name_for,
        )

    def resume(self, run: SteeredRun, *, start_time: float | None = None) -> None:
        """A run interrupted earlier continues: its session keeps going under a new run span, linked to the
        previous part's (started at ``start_time``, seconds, when the part began before it was known)."""
        previous = run.recorder.part_id
        recorder = self.telemetry.run(run.recorder.info, links=[previous] if previous else ())
        recorder.run_start(run.recorder.info.run_id, {}, start_time=start_time)
        run.recorder = recorder
        run.session.emitter = recorder

    def watch_agent(self, agent_name: str) -> None:
        """Start the agent's SKIP series at 0, so an alert on its increase sees the first SKIP."""
        self.telemetry.instruments.init_skip_series(agent_name)

    def flush(self, timeout: float = 5.0) -> None:
        """Do the finished work runs in flight are batching and force-flush this telemetry's providers."""
        self.telemetry.flush_providers(timeout)
