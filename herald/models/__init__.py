"""SQLAlchemy tables: one schema for SQLite and PostgreSQL."""

from herald.models.analytics import AnalyticsCount, AnalyticsDay, AnalyticsProgress
from herald.models.audit import AuditEntry
from herald.models.base import Base
from herald.models.context import Context
from herald.models.delivery_event import DeliveryEventKey, SpentSignatureToken
from herald.models.environment_variable import EnvironmentVariable
from herald.models.event import Event, ExecutionDetail, Job, Notification
from herald.models.integration import Integration
from herald.models.integration_health import IntegrationHealth
from herald.models.layout import Layout
from herald.models.member import ConsoleSession, Member, MemberInvite, SignInFailure, SsoSignIn
from herald.models.message import IdempotencyRecord, Message
from herald.models.organization import ApiKey, Environment, NotificationGroup, Organization
from herald.models.preference import SubscriberPreference
from herald.models.realtime import RealtimePresence, RealtimeProcess
from herald.models.subscriber import Subscriber, Tenant, Topic, TopicSubscriber
from herald.models.subscriber_import import SubscriberImport
from herald.models.throttle import ThrottleWindow
from herald.models.translation import Translation, TranslationLocales
from herald.models.webhook import WebhookEndpoint
from herald.models.workflow import Workflow

__all__ = [
    "AnalyticsCount",
    "AnalyticsDay",
    "AnalyticsProgress",
    "ApiKey",
    "AuditEntry",
    "Base",
    "ConsoleSession",
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
    "Member",
    "MemberInvite",
    "Message",
    "Notification",
    "NotificationGroup",
    "Organization",
    "RealtimePresence",
    "RealtimeProcess",
    "SignInFailure",
    "SpentSignatureToken",
    "SsoSignIn",
    "Subscriber",
    "SubscriberImport",
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
