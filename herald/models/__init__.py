"""SQLAlchemy tables: one schema for SQLite and PostgreSQL."""

from herald.models.base import Base
from herald.models.context import Context
from herald.models.delivery_event import DeliveryEventKey
from herald.models.environment_variable import EnvironmentVariable
from herald.models.event import Event, ExecutionDetail, Job, Notification
from herald.models.integration import Integration
from herald.models.integration_health import IntegrationHealth
from herald.models.layout import Layout
from herald.models.message import IdempotencyRecord, Message
from herald.models.organization import ApiKey, Environment, NotificationGroup, Organization
from herald.models.preference import SubscriberPreference
from herald.models.realtime import RealtimePresence, RealtimeProcess
from herald.models.subscriber import Subscriber, Tenant, Topic, TopicSubscriber
from herald.models.throttle import ThrottleWindow
from herald.models.translation import Translation, TranslationLocales
from herald.models.webhook import WebhookEndpoint
from herald.models.workflow import Workflow

__all__ = [
    "ApiKey",
    "Base",
    "Context",
    "DeliveryEventKey",
    "Environment",
    "EnvironmentVariable",
    "Event",
    "ExecutionDetail",
    "IdempotencyRecord",
    "Integration",
    "IntegrationHealth",
    "Job",
    "Layout",
    "Message",
    "Notification",
    "NotificationGroup",
    "Organization",
    "RealtimePresence",
    "RealtimeProcess",
    "Subscriber",
    "SubscriberPreference",
    "Tenant",
    "ThrottleWindow",
    "Topic",
    "TopicSubscriber",
    "Translation",
    "TranslationLocales",
    "WebhookEndpoint",
    "Workflow",
]
