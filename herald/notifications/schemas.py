"""Activity feed models: Novu's ``Activity*ResponseDto`` shapes (``GET /v1/notifications``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from herald.integrations.schemas import StepFilter
from herald.kit.schemas import Schema, optional_field

Channel = Literal["in_app", "email", "sms", "chat", "push"]
CHANNELS: tuple[str, ...] = ("in_app", "email", "sms", "chat", "push")
StepType = Literal[
    "in_app",
    "email",
    "sms",
    "chat",
    "push",
    "digest",
    "delay",
    "throttle",
    "custom",
    "trigger",
    "tool",
    "http_request",
]
ExecutionDetailStatus = Literal["Success", "Warning", "Failed", "Pending", "Queued", "ReadConfirmation"]
ExecutionDetailSource = Literal["Credentials", "Internal", "Payload", "Webhook"]


class ActivityExecutionDetail(Schema):
    """One thing that happened to a job (``ActivityNotificationExecutionDetailResponseDto``)."""

    id: str = Field(alias="_id")
    job_id: str = Field(alias="_jobId")
    notification_id: str = optional_field(alias="_notificationId")
    subscriber_id: str = optional_field(alias="_subscriberId")
    status: ExecutionDetailStatus
    detail: str
    isRetry: bool
    isTest: bool = False
    providerId: str = optional_field()
    # Novu sends the provider's raw answer as a JSON string.
    raw: str = optional_field()
    source: ExecutionDetailSource
    createdAt: str


class ActivityStepVariant(Schema):
    """The workflow step a job ran, as it was when the event was accepted."""

    id: str = Field(alias="_id")
    uuid: str = optional_field()
    name: str = optional_field()
    template_id: str = Field(alias="_templateId")
    active: bool
    shouldStopOnFail: bool = optional_field()
    template: dict[str, Any] = optional_field()
    filters: list[StepFilter] = Field(default_factory=list)
    parent_id: str = optional_field(alias="_parentId")
    metadata: dict[str, Any] = optional_field()
    replyCallback: dict[str, Any] = optional_field()


class ActivityStep(ActivityStepVariant):
    variants: list[ActivityStepVariant] = optional_field()


class ActivityJob(Schema):
    """One step of one notification (``ActivityNotificationJobResponseDto``)."""

    id: str = Field(alias="_id")
    type: StepType
    digest: dict[str, Any] = optional_field(description="The digest step's metadata, with the digested events once it closed")
    executionDetails: list[ActivityExecutionDetail]
    step: ActivityStep
    overrides: dict[str, Any] = optional_field()
    payload: dict[str, Any] = optional_field()
    providerId: str
    status: str = Field(
        description="pending, queued, running, completed, failed, delayed, canceled, merged or skipped"
    )
    updatedAt: str = optional_field()


class ActivitySubscriber(Schema):
    id: str = Field(alias="_id")
    subscriberId: str
    firstName: str = optional_field()
    lastName: str = optional_field()
    email: str = optional_field()
    phone: str = optional_field()


class ActivityTrigger(Schema):
    type: Literal["event"] = "event"
    identifier: str
    variables: list[dict[str, Any]] = Field(default_factory=list)


class ActivityTemplate(Schema):
    """The workflow that sent the notification."""

    id: str = Field(alias="_id")
    name: str
    triggers: list[ActivityTrigger]


class ActivityNotification(Schema):
    """One run of a workflow for one subscriber (``ActivityNotificationResponseDto``)."""

    id: str = Field(alias="_id")
    environment_id: str = Field(alias="_environmentId")
    organization_id: str = Field(alias="_organizationId")
    subscriber_id: str = Field(alias="_subscriberId", description="Herald's internal id of the subscriber")
    transactionId: str
    template_id: str = Field(alias="_templateId")
    digested_notification_id: str = optional_field(
        alias="_digestedNotificationId", description="The notification whose digest this one was merged into"
    )
    createdAt: str
    channels: list[StepType]
    to: dict[str, Any] = optional_field()
    payload: dict[str, Any]
    subscriber: ActivitySubscriber = optional_field()
    template: ActivityTemplate = optional_field()
    jobs: list[ActivityJob]


class ActivityStats(Schema):
    weeklySent: int = Field(description="Notifications created in the last 7 days")
    monthlySent: int = Field(description="Notifications created in the last 30 days")


class ActivityGraphDay(Schema):
    """Notifications of one UTC day."""

    id: str = Field(alias="_id", description="The day, YYYY-MM-DD (UTC)")
    count: int
    templates: list[str] = Field(description="Ids of the workflows that sent them")
    channels: list[StepType]


# -- /v1/activity: the workflow runs Novu's dashboard reads (herald/notifications/runs.py) ----------


class WorkflowRunExecutionDetail(Schema):
    """``StepExecutionDetailDto``."""

    id: str = Field(alias="_id")
    createdAt: str = optional_field()
    status: ExecutionDetailStatus
    detail: str
    providerId: str = optional_field()
    raw: str = optional_field()


class WorkflowRunStep(Schema):
    """``StepRunDto``: one step (job) of a run."""

    stepRunId: str
    stepId: str
    stepType: str
    stepName: str
    providerId: str = optional_field()
    status: str = Field(description="pending, queued, running, completed, failed, delayed, canceled, merged or skipped")
    createdAt: str
    updatedAt: str
    executionDetails: list[WorkflowRunExecutionDetail]
    digest: dict[str, Any] = optional_field()


class WorkflowRun(Schema):
    """``WorkflowRunDto``: one run of a workflow for one subscriber (a notification)."""

    id: str
    workflowRunId: str
    workflowId: str = Field(description="The workflow's _id")
    workflowName: str
    organizationId: str
    environmentId: str
    subscriberId: str = Field(description="Herald's internal id of the subscriber")
    internalSubscriberId: str
    externalSubscriberId: str = optional_field()
    status: Literal["success", "error", "pending"]
    deliveryLifecycleStatus: Literal[
        "pending", "sent", "errored", "skipped", "canceled", "merged", "delivered", "interacted"
    ]
    triggerIdentifier: str
    transactionId: str
    channels: list[str]
    payload: dict[str, Any] = optional_field()
    topics: list[str] = optional_field()
    isDigest: bool
    digestedWorkflowRunId: str = optional_field()
    createdAt: str
    updatedAt: str
    steps: list[WorkflowRunStep] = optional_field()


class WorkflowRunDetail(WorkflowRun):
    """``GetWorkflowRunResponseDto``: a run with its steps, payload and overrides."""

    steps: list[WorkflowRunStep]
    payload: dict[str, Any]
    overrides: dict[str, Any] = optional_field()


class WorkflowRunsPage(Schema):
    """``GetWorkflowRunsResponseDto``: newest first, keyset pages (``cursor`` is the ``nextCursor`` given)."""

    data: list[WorkflowRun]
    nextCursor: str | None = None
    previousCursor: str | None = None
    hasMore: bool
    pageSize: int
