// The @novu/api operations Herald serves, one entry each: `name` is the SDK path, `run` calls it
// against the world the Python side made (test_novu_api.py: a subscriber with two in-app messages the
// engine sent, a workflow, integrations, a topic, a delayed transaction), and `check` asserts on what
// came back, reading Herald again through the SDK where the operation changed something.
// Adding an operation is adding one entry here.
import assert from "node:assert/strict";

const ids = (items) => items.map((item) => item.id);
const inAppStep = {
  name: "Inbox", stepId: "inbox",
  type: "in_app",
  controlValues: { subject: "Order {{payload.order}}", body: "Hello {{subscriber.firstName}}, order {{payload.order}}" },
};
const emailStep = { name: "Mail", stepId: "mail", type: "email", controlValues: { subject: "Hi {{subscriber.firstName}}", body: "<p>{{payload.order}}</p>", editorType: "html" } };
// The block editor's document (Maily's TipTap JSON), with no editorType: @novu/api sends its default, "block".
const blockDocument = JSON.stringify({
  type: "doc",
  content: [
    { type: "paragraph", content: [{ type: "text", text: "Order " }, { type: "variable", attrs: { id: "payload.order" } }] },
    { type: "button", attrs: { text: "Track", url: "payload.trackUrl", isUrlVariable: true } },
  ],
});
// An http_request step as @novu/api types it (HttpRequestControlDto).
const httpRequestStep = {
  name: "Notify backend",
  stepId: "notify-backend",
  type: "http_request",
  controlValues: { method: "POST", url: "https://backend.example.com/hooks/{{payload.order}}", headers: [{ key: "X-Source", value: "herald" }], body: '{"order": "{{payload.order}}"}', continueOnFailure: true },
};
// A custom step of an API-made workflow: its controls are its output.
const customStep = { name: "Tag", stepId: "tag", type: "custom", controlValues: { custom: { segment: "vip" } } };
const blockEmailStep = { name: "Blocks", stepId: "blocks", type: "email", controlValues: { subject: "Order {{payload.order}}", body: blockDocument } };
const layoutBody = "<html><body><h1>{{subscriber.firstName}}</h1>{{content}}</body></html>";
const createLayout = async (novu, layoutId) => {
  await novu.layouts.create({ layoutId, name: "Brand" });
  return (await novu.layouts.update({ name: "Brand", controlValues: { email: { body: layoutBody, editorType: "html" } } }, layoutId)).result;
};
const values = (variable) => Object.fromEntries(variable.values.map((value) => [value.environmentId, value.value]));
const french = { welcome: { title: "Bienvenue" }, cta: "Commencer" };
const translate = (novu, resourceId, locale, content) => novu.translations.create({ resourceId, resourceType: "workflow", locale, content });
const translationOf = (novu, resourceId, locale) => novu.translations.retrieve({ resourceType: "workflow", resourceId, locale });
const jsonFile = (fileName, value) => ({ fileName, content: new TextEncoder().encode(JSON.stringify(value)) });
const createWorkflow = async (novu, workflowId, fields = {}) =>
  (await novu.workflows.create({ name: "Order shipped", workflowId, steps: [inAppStep], active: true, ...fields })).result;

export const operations = [
  {
    name: "trigger",
    run: (novu, w) => novu.trigger({ workflowId: w.workflow.identifier, to: w.subscriberId, payload: { name: "Node" } }),
    check: (r) => {
      assert.equal(r.result.acknowledged, true);
      assert.equal(r.result.status, "processed");
      assert.ok(r.result.transactionId);
    },
  },
  {
    name: "triggerBulk",
    run: (novu, w) =>
      novu.triggerBulk({
        events: [
          { workflowId: w.workflow.identifier, to: w.subscriberId },
          { workflowId: w.workflow.identifier, to: w.otherSubscriberId },
        ],
      }),
    check: (r) => {
      assert.deepEqual(r.result.map((item) => item.status), ["processed", "processed"]);
      assert.notEqual(r.result[0].transactionId, r.result[1].transactionId);
    },
  },
  {
    name: "triggerBroadcast",
    run: (novu, w) => novu.triggerBroadcast({ name: w.workflow.identifier, payload: { name: "all" } }),
    check: (r) => assert.equal(r.result.status, "processed"),
  },
  {
    name: "cancel",
    run: (novu, w) => novu.cancel(w.delayedTransactionId),
    check: async (r, novu, w) => {
      assert.equal(r.result, true);
      assert.equal((await novu.cancel(w.delayedTransactionId)).result, false);
    },
  },
  {
    name: "subscribers.create",
    run: (novu) => novu.subscribers.create({ subscriberId: "node-made", firstName: "Grace", email: "grace@example.com" }),
    check: async (r, novu) => {
      assert.equal(r.result.subscriberId, "node-made");
      assert.equal((await novu.subscribers.retrieve("node-made")).result.firstName, "Grace");
    },
  },
  {
    name: "subscribers.retrieve",
    run: (novu, w) => novu.subscribers.retrieve(w.subscriberId),
    check: (r, novu, w) => {
      assert.equal(r.result.subscriberId, w.subscriberId);
      assert.equal(r.result.id, w.subscriberInternalId);
      assert.equal(r.result.firstName, "Ada");
    },
  },
  {
    name: "subscribers.patch",
    run: (novu, w) => novu.subscribers.patch({ lastName: "Hopper", data: { plan: "pro" } }, w.otherSubscriberId),
    check: async (r, novu, w) => {
      assert.equal(r.result.lastName, "Hopper");
      const stored = (await novu.subscribers.retrieve(w.otherSubscriberId)).result;
      assert.deepEqual([stored.firstName, stored.lastName, stored.data], ["Ada", "Hopper", { plan: "pro" }]);
    },
  },
  {
    name: "subscribers.delete",
    run: (novu, w) => novu.subscribers.delete(w.otherSubscriberId),
    check: async (r, novu, w) => {
      assert.deepEqual([r.result.acknowledged, r.result.status], [true, "deleted"]);
      await assert.rejects(novu.subscribers.retrieve(w.otherSubscriberId), (error) => error.statusCode === 404);
    },
  },
  {
    name: "subscribers.createBulk",
    run: (novu, w) =>
      novu.subscribers.createBulk({
        subscribers: [{ subscriberId: "node-bulk", firstName: "New" }, { subscriberId: w.otherSubscriberId, lastName: "Known" }],
      }),
    check: (r, novu, w) => {
      assert.deepEqual(r.result.created.map((item) => item.subscriberId), ["node-bulk"]);
      assert.deepEqual(r.result.updated.map((item) => item.subscriberId), [w.otherSubscriberId]);
      assert.deepEqual(r.result.failed, []);
    },
  },
  {
    name: "subscribers.credentials.update",
    run: (novu, w) => novu.subscribers.credentials.update({ providerId: "fcm", credentials: { deviceTokens: ["t1"] } }, w.subscriberId),
    check: (r) => {
      const fcm = r.result.channels.find((channel) => channel.providerId === "fcm");
      assert.deepEqual(fcm.credentials.deviceTokens, ["t1"]);
    },
  },
  {
    name: "subscribers.credentials.append",
    run: async (novu, w) => {
      await novu.subscribers.credentials.update({ providerId: "fcm", credentials: { deviceTokens: ["t1"] } }, w.subscriberId);
      return novu.subscribers.credentials.append({ providerId: "fcm", credentials: { deviceTokens: ["t2"] } }, w.subscriberId);
    },
    check: (r) => {
      const fcm = r.result.channels.find((channel) => channel.providerId === "fcm");
      assert.deepEqual(fcm.credentials.deviceTokens, ["t1", "t2"]);
    },
  },
  {
    name: "subscribers.credentials.delete",
    run: async (novu, w) => {
      await novu.subscribers.credentials.update({ providerId: "fcm", credentials: { deviceTokens: ["t1"] } }, w.subscriberId);
      return novu.subscribers.credentials.delete(w.subscriberId, "fcm");
    },
    check: async (r, novu, w) => {
      const stored = (await novu.subscribers.retrieve(w.subscriberId)).result;
      assert.equal((stored.channels ?? []).some((channel) => channel.providerId === "fcm"), false);
    },
  },
  {
    name: "subscribers.properties.updateOnlineFlag",
    run: (novu, w) => novu.subscribers.properties.updateOnlineFlag({ isOnline: true }, w.subscriberId),
    check: async (r, novu, w) => {
      assert.equal(r.result.isOnline, true);
      assert.equal((await novu.subscribers.retrieve(w.subscriberId)).result.isOnline, true);
    },
  },
  {
    name: "subscribers.messages.updateAsSeen",
    run: (novu, w) =>
      novu.subscribers.messages.updateAsSeen({
        messageId: w.messageIds[0],
        type: "primary",
        subscriberId: w.subscriberId,
        markMessageActionAsSeenDto: { status: "done" },
      }),
    check: (r, novu, w) => {
      assert.equal(r.result.id, w.messageIds[0]);
      assert.equal(r.result.cta.action.status, "done");
      assert.equal(r.result.cta.action.result.type, "primary");
    },
  },
  {
    name: "subscribers.messages.markAll",
    run: (novu, w) => novu.subscribers.messages.markAll({ markAs: "read" }, w.subscriberId),
    check: async (r, novu, w) => {
      assert.equal(r.result, 2);
      const feed = (await novu.subscribers.notifications.feed({ subscriberId: w.subscriberId })).result;
      assert.ok(feed.data.every((item) => item.read));
    },
  },
  {
    name: "subscribers.messages.markAllAs",
    run: (novu, w) => novu.subscribers.messages.markAllAs({ messageId: [w.messageIds[1]], markAs: "seen" }, w.subscriberId),
    check: async (r, novu, w) => {
      assert.deepEqual(ids(r.result), [w.messageIds[1]]);
      assert.equal(r.result[0].seen, true);
      assert.equal((await novu.subscribers.notifications.unseenCount({ subscriberId: w.subscriberId })).result.count, 1);
    },
  },
  {
    name: "subscribers.notifications.feed",
    run: (novu, w) => novu.subscribers.notifications.feed({ subscriberId: w.subscriberId, limit: 1 }),
    check: async (r, novu, w) => {
      assert.equal(r.result.data.length, 1);
      assert.equal(r.result.hasMore, true);
      const next = (await novu.subscribers.notifications.feed({ subscriberId: w.subscriberId, limit: 1, page: 1 })).result;
      assert.deepEqual([...ids(r.result.data), ...ids(next.data)].sort(), [...w.messageIds].sort());
    },
  },
  {
    name: "subscribers.notifications.unseenCount",
    run: (novu, w) => novu.subscribers.notifications.unseenCount({ subscriberId: w.subscriberId }),
    check: (r) => assert.equal(r.result.count, 2),
  },
  {
    name: "subscribers.preferences.list",
    run: (novu, w) => novu.subscribers.preferences.list({ subscriberId: w.subscriberId }),
    check: (r, novu, w) => {
      assert.equal(r.result.global.enabled, true);
      const mine = r.result.workflows.find((item) => item.workflow.identifier === w.workflow.identifier);
      assert.equal(mine.channels.inApp, true);
    },
  },
  {
    name: "subscribers.preferences.update",
    run: (novu, w) => novu.subscribers.preferences.update({ workflowId: w.workflow.id, channels: { inApp: false } }, w.subscriberId),
    check: async (r, novu, w) => {
      const listed = (await novu.subscribers.preferences.list({ subscriberId: w.subscriberId })).result;
      const mine = listed.workflows.find((item) => item.workflow.identifier === w.workflow.identifier);
      assert.equal(mine.channels.inApp, false);
    },
  },
  {
    name: "subscribers.preferences.bulkUpdate",
    run: (novu, w) =>
      novu.subscribers.preferences.bulkUpdate({ preferences: [{ workflowId: w.workflow.identifier, channels: { inApp: false } }] }, w.subscriberId),
    check: (r, novu, w) => {
      const mine = r.result.find((item) => item.workflow.identifier === w.workflow.identifier);
      assert.equal(mine.channels.inApp, false);
    },
  },
  {
    name: "topics.subscribers.retrieve",
    run: (novu, w) => novu.topics.subscribers.retrieve(w.subscriberId, w.topicKey),
    check: async (r, novu, w) => {
      assert.deepEqual([r.result.topicKey, r.result.externalSubscriberId], [w.topicKey, w.subscriberId]);
      await assert.rejects(novu.topics.subscribers.retrieve(w.otherSubscriberId, w.topicKey), (error) => error.statusCode === 404);
    },
  },
  {
    name: "integrations.list",
    run: (novu) => novu.integrations.list(),
    check: (r, novu, w) => assert.ok(ids(r.result).includes(w.integrationIds.sendgrid)),
  },
  {
    name: "integrations.create",
    run: (novu) =>
      novu.integrations.create({ providerId: "mailgun", channel: "email", active: true, credentials: { apiKey: "key-test", domain: "mg.example.com" } }),
    check: async (r, novu) => {
      assert.deepEqual([r.result.providerId, r.result.active], ["mailgun", true]);
      assert.ok(ids((await novu.integrations.list()).result).includes(r.result.id));
    },
  },
  {
    name: "integrations.update",
    run: (novu, w) => novu.integrations.update({ name: "Renamed" }, w.integrationIds.postmark),
    check: async (r, novu, w) => {
      assert.equal(r.result.name, "Renamed");
      const stored = (await novu.integrations.list()).result.find((item) => item.id === w.integrationIds.postmark);
      assert.equal(stored.name, "Renamed");
    },
  },
  {
    name: "integrations.delete",
    run: (novu, w) => novu.integrations.delete(w.integrationIds.postmark),
    check: (r, novu, w) => {
      assert.ok(!ids(r.result).includes(w.integrationIds.postmark));
      assert.ok(ids(r.result).includes(w.integrationIds.sendgrid));
    },
  },
  {
    name: "integrations.setAsPrimary",
    run: (novu, w) => novu.integrations.setAsPrimary(w.integrationIds.postmark),
    check: async (r, novu, w) => {
      assert.equal(r.result.primary, true);
      const stored = (await novu.integrations.list()).result.find((item) => item.id === w.integrationIds.sendgrid);
      assert.equal(stored.primary, false);
    },
  },
  {
    name: "integrations.listActive",
    run: (novu) => novu.integrations.listActive(),
    check: (r, novu, w) => {
      assert.ok(ids(r.result).includes(w.integrationIds.sendgrid));
      assert.ok(r.result.every((item) => item.active));
    },
  },
  {
    name: "messages.retrieve",
    run: (novu, w) => novu.messages.retrieve({ subscriberId: w.subscriberId, channel: "in_app" }),
    check: (r, novu, w) => assert.deepEqual(ids(r.result.data).sort(), [...w.messageIds].sort()),
  },
  {
    name: "messages.delete",
    run: (novu, w) => novu.messages.delete(w.messageIds[0]),
    check: async (r, novu, w) => {
      assert.deepEqual([r.result.acknowledged, r.result.status], [true, "deleted"]);
      assert.deepEqual(ids((await novu.messages.retrieve({ subscriberId: w.subscriberId })).result.data), [w.messageIds[1]]);
    },
  },
  {
    name: "messages.deleteByTransactionId",
    run: (novu, w) => novu.messages.deleteByTransactionId(w.transactionIds[0]),
    check: async (r, novu, w) => {
      assert.deepEqual(ids((await novu.messages.retrieve({ subscriberId: w.subscriberId })).result.data), [w.messageIds[1]]);
    },
  },
  {
    name: "notifications.list",
    run: (novu, w) => novu.notifications.list({ subscriberIds: [w.subscriberId], channels: ["in_app"] }),
    check: (r, novu, w) => assert.deepEqual(ids(r.result.data).sort(), [...w.notificationIds].sort()),
  },
  {
    name: "notifications.retrieve",
    run: (novu, w) => novu.notifications.retrieve(w.notificationIds[0]),
    check: (r, novu, w) => {
      assert.equal(r.result.id, w.notificationIds[0]);
      assert.equal(r.result.transactionId, w.transactionIds[0]);
      assert.equal(r.result.jobs[0].status, "completed");
    },
  },
  {
    name: "activity.track",
    run: (novu, w) =>
      novu.activity.track({
        environmentId: w.environmentId,
        integrationId: w.integrationIds.sendgrid,
        requestBody: { messageId: w.messageIds[0], status: "opened", date: "2026-01-02T03:04:05.000Z" },
      }),
    check: async (r, novu, w) => {
      assert.equal(r.length, 1);
      assert.deepEqual([r[0].id, r[0].event.status], [w.messageIds[0], "opened"]);
      const feed = (await novu.subscribers.notifications.feed({ subscriberId: w.subscriberId })).result;
      assert.equal(feed.data.find((item) => item.id === w.messageIds[0]).seen, true);
      // A provider's own body (a Vonage delivery receipt, unsigned: the integration has no signature secret).
      const vonage = (await novu.integrations.create({ providerId: "nexmo", channel: "sms", active: false })).result;
      const receipt = {
        msisdn: "15005550006", to: "Herald", "network-code": "310260", messageId: w.messageIds[1],
        price: "0.0050", status: "delivered", scts: "2601020304", "err-code": "0",
        "message-timestamp": "2026-01-02 03:04:05",
      };
      const tracked = await novu.activity.track({ environmentId: w.environmentId, integrationId: vonage.id, requestBody: receipt });
      assert.deepEqual(tracked.map((item) => [item.id, item.event.status]), [[w.messageIds[1], "delivered"]]);
    },
  },
  {
    name: "subscribers.search",
    run: (novu, w) => novu.subscribers.search({ subscriberId: w.subscriberId, limit: 10 }),
    check: (r, novu, w) => {
      assert.deepEqual(r.result.data.map((item) => item.subscriberId), [w.subscriberId]);
      assert.equal(r.result.data[0].id, w.subscriberInternalId);
    },
  },
  {
    name: "subscribers.notifications.list",
    run: (novu, w) => novu.subscribers.notifications.list({ subscriberId: w.subscriberId, limit: 1 }),
    check: async (r, novu, w) => {
      assert.equal(r.result.data.length, 1);
      assert.equal(r.result.hasMore, true);
      const after = r.result.data[0].id;
      const rest = (await novu.subscribers.notifications.list({ subscriberId: w.subscriberId, after })).result;
      assert.deepEqual([after, ...ids(rest.data)].sort(), [...w.messageIds].sort());
      assert.equal(rest.hasMore, false);
    },
  },
  {
    name: "subscribers.notifications.count",
    run: (novu, w) => novu.subscribers.notifications.count(w.subscriberId, JSON.stringify([{ read: false }, { read: true }])),
    check: (r) => assert.deepEqual(r.result.map((item) => item.count), [2, 0]),
  },
  {
    name: "subscribers.notifications.markAsRead",
    run: (novu, w) => novu.subscribers.notifications.markAsRead({ subscriberId: w.subscriberId, notificationId: w.messageIds[0] }),
    check: async (r, novu, w) => {
      assert.deepEqual([r.result.id, r.result.isRead], [w.messageIds[0], true]);
      const unread = (await novu.subscribers.notifications.list({ subscriberId: w.subscriberId, read: false })).result;
      assert.deepEqual(ids(unread.data), [w.messageIds[1]]);
    },
  },
  {
    name: "subscribers.notifications.markAsUnread",
    run: async (novu, w) => {
      await novu.subscribers.notifications.markAsRead({ subscriberId: w.subscriberId, notificationId: w.messageIds[0] });
      return novu.subscribers.notifications.markAsUnread({ subscriberId: w.subscriberId, notificationId: w.messageIds[0] });
    },
    check: async (r, novu, w) => {
      assert.equal(r.result.isRead, false);
      const unread = (await novu.subscribers.notifications.list({ subscriberId: w.subscriberId, read: false })).result;
      assert.equal(unread.data.length, 2);
    },
  },
  {
    name: "subscribers.notifications.archive",
    run: (novu, w) => novu.subscribers.notifications.archive({ subscriberId: w.subscriberId, notificationId: w.messageIds[0] }),
    check: async (r, novu, w) => {
      assert.equal(r.result.isArchived, true);
      const archived = (await novu.subscribers.notifications.list({ subscriberId: w.subscriberId, archived: true })).result;
      assert.deepEqual(ids(archived.data), [w.messageIds[0]]);
    },
  },
  {
    name: "subscribers.notifications.unarchive",
    run: async (novu, w) => {
      await novu.subscribers.notifications.archive({ subscriberId: w.subscriberId, notificationId: w.messageIds[0] });
      return novu.subscribers.notifications.unarchive({ subscriberId: w.subscriberId, notificationId: w.messageIds[0] });
    },
    check: async (r, novu, w) => {
      assert.equal(r.result.isArchived, false);
      const archived = (await novu.subscribers.notifications.list({ subscriberId: w.subscriberId, archived: true })).result;
      assert.deepEqual(archived.data, []);
    },
  },
  {
    name: "subscribers.notifications.snooze",
    run: (novu, w) =>
      novu.subscribers.notifications.snooze({
        subscriberId: w.subscriberId,
        notificationId: w.messageIds[0],
        snoozeSubscriberNotificationDto: { snoozeUntil: new Date(Date.now() + 2 * 3600 * 1000) },
      }),
    check: async (r, novu, w) => {
      assert.equal(r.result.isSnoozed, true);
      assert.ok(r.result.snoozedUntil);
      const snoozed = (await novu.subscribers.notifications.list({ subscriberId: w.subscriberId, snoozed: true })).result;
      assert.deepEqual(ids(snoozed.data), [w.messageIds[0]]);
    },
  },
  {
    name: "subscribers.notifications.unsnooze",
    run: async (novu, w) => {
      const until = new Date(Date.now() + 2 * 3600 * 1000);
      const request = { subscriberId: w.subscriberId, notificationId: w.messageIds[0] };
      await novu.subscribers.notifications.snooze({ ...request, snoozeSubscriberNotificationDto: { snoozeUntil: until } });
      return novu.subscribers.notifications.unsnooze(request);
    },
    check: async (r, novu, w) => {
      assert.equal(r.result.isSnoozed, false);
      const snoozed = (await novu.subscribers.notifications.list({ subscriberId: w.subscriberId, snoozed: true })).result;
      assert.deepEqual(snoozed.data, []);
    },
  },
  {
    name: "subscribers.notifications.completeAction",
    run: (novu, w) =>
      novu.subscribers.notifications.completeAction({ subscriberId: w.subscriberId, notificationId: w.messageIds[0], actionType: "primary" }),
    check: async (r, novu, w) => {
      assert.equal(r.result.primaryAction.isCompleted, true);
      const stored = (await novu.messages.retrieve({ subscriberId: w.subscriberId })).result.data.find((m) => m.id === w.messageIds[0]);
      assert.equal(stored.cta.action.status, "done");
    },
  },
  {
    name: "subscribers.notifications.revertAction",
    run: async (novu, w) => {
      const request = { subscriberId: w.subscriberId, notificationId: w.messageIds[0], actionType: "primary" };
      await novu.subscribers.notifications.completeAction(request);
      return novu.subscribers.notifications.revertAction(request);
    },
    check: async (r, novu, w) => {
      assert.equal(r.result.primaryAction.isCompleted, false);
      const stored = (await novu.messages.retrieve({ subscriberId: w.subscriberId })).result.data.find((m) => m.id === w.messageIds[0]);
      assert.equal(stored.cta.action.status, "pending");
    },
  },
  {
    name: "subscribers.notifications.delete",
    run: (novu, w) => novu.subscribers.notifications.delete({ subscriberId: w.subscriberId, notificationId: w.messageIds[0] }),
    check: async (r, novu, w) => {
      const left = (await novu.subscribers.notifications.list({ subscriberId: w.subscriberId })).result;
      assert.deepEqual(ids(left.data), [w.messageIds[1]]);
    },
  },
  {
    name: "subscribers.notifications.deleteAll",
    run: (novu, w) => novu.subscribers.notifications.deleteAll({}, w.subscriberId),
    check: async (r, novu, w) => {
      assert.deepEqual((await novu.subscribers.notifications.list({ subscriberId: w.subscriberId })).result.data, []);
    },
  },
  {
    name: "subscribers.notifications.markAllAsRead",
    run: (novu, w) => novu.subscribers.notifications.markAllAsRead({}, w.subscriberId),
    check: async (r, novu, w) => {
      const counts = (await novu.subscribers.notifications.count(w.subscriberId, JSON.stringify([{ read: false }, { read: true }]))).result;
      assert.deepEqual(counts.map((item) => item.count), [0, 2]);
    },
  },
  {
    name: "subscribers.notifications.archiveAll",
    run: (novu, w) => novu.subscribers.notifications.archiveAll({}, w.subscriberId),
    check: async (r, novu, w) => {
      const archived = (await novu.subscribers.notifications.list({ subscriberId: w.subscriberId, archived: true })).result;
      assert.deepEqual(ids(archived.data).sort(), [...w.messageIds].sort());
    },
  },
  {
    name: "subscribers.notifications.archiveAllRead",
    run: async (novu, w) => {
      await novu.subscribers.notifications.markAsRead({ subscriberId: w.subscriberId, notificationId: w.messageIds[1] });
      return novu.subscribers.notifications.archiveAllRead({}, w.subscriberId);
    },
    check: async (r, novu, w) => {
      const archived = (await novu.subscribers.notifications.list({ subscriberId: w.subscriberId, archived: true })).result;
      assert.deepEqual(ids(archived.data), [w.messageIds[1]]);
    },
  },
  {
    name: "subscribers.notifications.markAsSeen",
    run: (novu, w) => novu.subscribers.notifications.markAsSeen({ notificationIds: [w.messageIds[0]] }, w.subscriberId),
    check: async (r, novu, w) => {
      const unseen = (await novu.subscribers.notifications.list({ subscriberId: w.subscriberId, seen: false })).result;
      assert.deepEqual(ids(unseen.data), [w.messageIds[1]]);
    },
  },
  {
    name: "subscribers.topics.list",
    run: (novu, w) => novu.subscribers.topics.list({ subscriberId: w.subscriberId }),
    check: (r, novu, w) => {
      assert.deepEqual(r.result.data.map((item) => item.topic.key), [w.topicKey]);
      assert.equal(r.result.data[0].subscriber.subscriberId, w.subscriberId);
    },
  },
  {
    name: "topics.list",
    run: (novu, w) => novu.topics.list({ key: w.topicKey }),
    check: (r, novu, w) => {
      assert.deepEqual(r.result.data.map((item) => [item.key, item.name]), [[w.topicKey, "Readers"]]);
      assert.equal(r.result.totalCount, 1);
    },
  },
  {
    name: "topics.create",
    run: (novu) => novu.topics.create({ key: "node-topic", name: "Node topic" }),
    check: async (r, novu) => {
      assert.deepEqual([r.result.key, r.result.name], ["node-topic", "Node topic"]);
      assert.equal((await novu.topics.get("node-topic")).result.id, r.result.id);
    },
  },
  {
    name: "topics.get",
    run: (novu, w) => novu.topics.get(w.topicKey),
    check: async (r, novu, w) => {
      assert.deepEqual([r.result.key, r.result.name], [w.topicKey, "Readers"]);
      await assert.rejects(novu.topics.get("no-such-topic"), (error) => error.statusCode === 404);
    },
  },
  {
    name: "topics.update",
    run: (novu, w) => novu.topics.update({ name: "Writers" }, w.topicKey),
    check: async (r, novu, w) => {
      assert.equal(r.result.name, "Writers");
      assert.equal((await novu.topics.get(w.topicKey)).result.name, "Writers");
    },
  },
  {
    name: "topics.delete",
    run: (novu, w) => novu.topics.delete(w.topicKey),
    check: async (r, novu, w) => {
      assert.equal(r.result.acknowledged, true);
      await assert.rejects(novu.topics.get(w.topicKey), (error) => error.statusCode === 404);
    },
  },
  {
    name: "topics.subscriptions.list",
    run: (novu, w) => novu.topics.subscriptions.list({ topicKey: w.topicKey }),
    check: (r, novu, w) => {
      assert.deepEqual(r.result.data.map((item) => item.subscriber.subscriberId), [w.subscriberId]);
      assert.equal(r.result.data[0].topic.key, w.topicKey);
    },
  },
  {
    name: "topics.subscriptions.create",
    run: (novu, w) =>
      novu.topics.subscriptions.create(
        { subscriptions: [{ subscriberId: w.otherSubscriberId, identifier: "node-sub" }, "ghost"] },
        w.topicKey,
      ),
    check: async (r, novu, w) => {
      assert.deepEqual([r.result.meta.successful, r.result.meta.failed], [1, 1]);
      assert.equal(r.result.errors[0].subscriberId, "ghost");
      const listed = (await novu.topics.subscriptions.list({ topicKey: w.topicKey })).result;
      assert.deepEqual(listed.data.map((item) => item.subscriber.subscriberId).sort(), [w.subscriberId, w.otherSubscriberId].sort());
      // A condition on the workflow (applied by the engine when a trigger goes to the topic) is kept as sent.
      const condition = { "==": [{ var: "payload.level" }, "high"] };
      const withCondition = await novu.topics.subscriptions.create(
        { subscriptions: [w.subscriberId], preferences: [{ workflowId: w.workflow.identifier, condition }] },
        "node-alerts",
      );
      assert.deepEqual(withCondition.result.data[0].preferences.map((item) => [item.workflow.identifier, item.condition]), [
        [w.workflow.identifier, condition],
      ]);
    },
  },
  {
    name: "topics.subscriptions.getSubscription",
    run: async (novu, w) => {
      const made = { subscriberId: w.otherSubscriberId, identifier: "node-sub", name: "Other's" };
      await novu.topics.subscriptions.create({ subscriptions: [made] }, w.topicKey);
      return novu.topics.subscriptions.getSubscription(w.topicKey, "node-sub");
    },
    check: async (r, novu, w) => {
      assert.deepEqual([r.result.identifier, r.result.name], ["node-sub", "Other's"]);
      await assert.rejects(novu.topics.subscriptions.getSubscription(w.topicKey, "no-such"), (error) => error.statusCode === 404);
    },
  },
  {
    name: "topics.subscriptions.update",
    run: async (novu, w) => {
      await novu.topics.subscriptions.create({ subscriptions: [{ subscriberId: w.otherSubscriberId, identifier: "node-sub" }] }, w.topicKey);
      return novu.topics.subscriptions.update({
        topicKey: w.topicKey,
        identifier: "node-sub",
        updateTopicSubscriptionRequestDto: { name: "Renamed", preferences: [{ workflowId: w.workflow.identifier, enabled: false }] },
      });
    },
    check: async (r, novu, w) => {
      assert.equal(r.result.name, "Renamed");
      assert.equal((await novu.topics.subscriptions.getSubscription(w.topicKey, "node-sub")).result.name, "Renamed");
    },
  },
  {
    name: "topics.subscriptions.delete",
    run: (novu, w) => novu.topics.subscriptions.delete({ subscriptions: [w.subscriberId, "ghost"] }, w.topicKey),
    check: async (r, novu, w) => {
      assert.deepEqual([r.result.data.length, r.result.meta.failed], [1, 1]);
      assert.deepEqual((await novu.topics.subscriptions.list({ topicKey: w.topicKey })).result.data, []);
    },
  },
  {
    name: "contexts.create",
    run: (novu) => novu.contexts.create({ type: "tenant", id: "acme", data: { plan: "pro" } }),
    check: async (r, novu) => {
      assert.deepEqual([r.result.type, r.result.id, r.result.data], ["tenant", "acme", { plan: "pro" }]);
      assert.deepEqual((await novu.contexts.retrieve("acme", "tenant")).result.data, { plan: "pro" });
    },
  },
  {
    name: "contexts.list",
    run: async (novu) => {
      await novu.contexts.create({ type: "tenant", id: "acme", data: {} });
      await novu.contexts.create({ type: "tenant", id: "globex", data: {} });
      return novu.contexts.list({ limit: 1 });
    },
    check: async (r, novu) => {
      assert.equal(r.result.data.length, 1);
      assert.equal(r.result.totalCount, 2);
      const rest = (await novu.contexts.list({ after: r.result.next })).result;
      assert.deepEqual([...r.result.data, ...rest.data].map((item) => item.id).sort(), ["acme", "globex"]);
    },
  },
  {
    name: "contexts.retrieve",
    run: async (novu) => {
      await novu.contexts.create({ type: "tenant", id: "acme", data: { plan: "pro" } });
      return novu.contexts.retrieve("acme", "tenant");
    },
    check: async (r, novu) => {
      assert.deepEqual([r.result.type, r.result.id, r.result.data], ["tenant", "acme", { plan: "pro" }]);
      await assert.rejects(novu.contexts.retrieve("nobody", "tenant"), (error) => error.statusCode === 404);
    },
  },
  {
    name: "contexts.update",
    run: async (novu) => {
      await novu.contexts.create({ type: "tenant", id: "acme", data: { plan: "pro" } });
      return novu.contexts.update({ id: "acme", type: "tenant", updateContextRequestDto: { data: { plan: "team" } } });
    },
    check: async (r, novu) => {
      assert.deepEqual(r.result.data, { plan: "team" });
      assert.deepEqual((await novu.contexts.retrieve("acme", "tenant")).result.data, { plan: "team" });
    },
  },
  {
    name: "contexts.delete",
    run: async (novu) => {
      await novu.contexts.create({ type: "tenant", id: "acme", data: {} });
      return novu.contexts.delete("acme", "tenant");
    },
    check: async (r, novu) => {
      await assert.rejects(novu.contexts.retrieve("acme", "tenant"), (error) => error.statusCode === 404);
    },
  },
  {
    name: "workflows.create",
    run: (novu) =>
      novu.workflows.create({
        name: "Order shipped",
        workflowId: "node-order",
        steps: [inAppStep, emailStep, blockEmailStep, httpRequestStep, customStep],
        tags: ["orders"],
      }),
    check: async (r, novu) => {
      assert.equal(r.result.workflowId, "node-order");
      assert.deepEqual(
        r.result.steps.map((step) => [step.stepId, step.type]),
        [["inbox", "in_app"], ["mail", "email"], ["blocks", "email"], ["notify-backend", "http_request"], ["tag", "custom"]],
      );
      assert.deepEqual(r.result.steps[3].controlValues, httpRequestStep.controlValues);
      assert.deepEqual(r.result.steps[4].controlValues, customStep.controlValues);
      const fetched = (await novu.workflows.get("node-order")).result;
      assert.deepEqual([fetched.id, fetched.tags], [r.result.id, ["orders"]]);
      // The block step, sent with the SDK's default editorType, reads back as sent and renders to HTML.
      assert.deepEqual([r.result.steps[2].controlValues.editorType, r.result.steps[2].controlValues.body], ["block", blockDocument]);
      const preview = await novu.workflows.steps.generatePreview({
        workflowId: "node-order",
        stepId: "blocks",
        generatePreviewRequestDto: { previewPayload: { payload: { order: "D-4", trackUrl: "https://shop.example.com/t/D-4" } } },
      });
      assert.ok(preview.result.result.preview.body.includes('<p style="margin:0 0 16px;">Order D-4</p>'));
      assert.ok(preview.result.result.preview.body.includes('href="https://shop.example.com/t/D-4"'));
    },
  },
  {
    name: "workflows.list",
    run: async (novu) => {
      await createWorkflow(novu, "node-first");
      await createWorkflow(novu, "node-second", { name: "Second one" });
      return novu.workflows.list({ query: "Second" });
    },
    check: (r) => {
      assert.deepEqual(r.result.workflows.map((item) => item.workflowId), ["node-second"]);
      assert.equal(r.result.totalCount, 1);
    },
  },
  {
    name: "workflows.get",
    run: async (novu) => novu.workflows.get((await createWorkflow(novu, "node-get")).id),
    check: async (r, novu) => {
      assert.equal(r.result.workflowId, "node-get");
      assert.equal(r.result.steps[0].controlValues.subject, "Order {{payload.order}}");
      await assert.rejects(novu.workflows.get("missing"), (error) => error.statusCode === 404);
    },
  },
  {
    name: "workflows.update",
    run: async (novu) => {
      const created = await createWorkflow(novu, "node-update");
      const changed = { ...inAppStep, controlValues: { body: "Changed {{payload.order}}" } };
      return novu.workflows.update({ name: "Updated", steps: [changed], origin: created.origin, preferences: {} }, created.id);
    },
    check: async (r, novu) => {
      assert.equal(r.result.name, "Updated");
      const fetched = (await novu.workflows.get("node-update")).result;
      assert.deepEqual([fetched.name, fetched.steps[0].controlValues.body], ["Updated", "Changed {{payload.order}}"]);
    },
  },
  {
    name: "workflows.patch",
    run: async (novu) => novu.workflows.patch({ active: false, tags: ["p"] }, (await createWorkflow(novu, "node-patch")).id),
    check: async (r, novu) => {
      assert.deepEqual([r.result.active, r.result.tags], [false, ["p"]]);
      assert.equal((await novu.workflows.get("node-patch")).result.active, false);
    },
  },
  {
    name: "workflows.delete",
    run: async (novu) => novu.workflows.delete((await createWorkflow(novu, "node-delete")).workflowId),
    check: async (r, novu) => {
      await assert.rejects(novu.workflows.get("node-delete"), (error) => error.statusCode === 404);
    },
  },
  {
    name: "workflows.sync",
    run: async (novu) => {
      const created = await createWorkflow(novu, "node-sync");
      // Into an unprotected environment: Production takes changes from its own keys only.
      const staging = (await novu.environments.create({ name: "Staging", color: "#ff0000" })).result;
      return novu.workflows.sync({ targetEnvironmentId: staging.id }, created.id);
    },
    check: async (r, novu) => {
      assert.equal(r.result.workflowId, "node-sync");
      assert.notEqual(r.result.id, (await novu.workflows.get("node-sync")).result.id);
      assert.deepEqual(r.result.steps.map((step) => step.stepId), ["inbox"]);
    },
  },
  {
    name: "workflows.steps.retrieve",
    run: async (novu) => {
      const created = await createWorkflow(novu, "node-steps", { steps: [inAppStep, emailStep] });
      return novu.workflows.steps.retrieve(created.workflowId, "mail");
    },
    check: async (r, novu) => {
      const created = (await novu.workflows.get("node-steps")).result;
      assert.deepEqual([r.result.id, r.result.type, r.result.workflowDatabaseId], [created.steps[1].id, "email", created.id]);
      await assert.rejects(novu.workflows.steps.retrieve("node-steps", "missing"), (error) => error.statusCode === 404);
    },
  },
  {
    name: "workflows.steps.generatePreview",
    run: async (novu) => {
      const created = await createWorkflow(novu, "node-preview");
      return novu.workflows.steps.generatePreview({
        workflowId: created.id,
        stepId: "inbox",
        generatePreviewRequestDto: { previewPayload: { payload: { order: "C-3" }, subscriber: { firstName: "Lin" } } },
      });
    },
    check: (r) => {
      assert.equal(r.result.result.type, "in_app");
      assert.equal(r.result.result.preview.body, "Hello Lin, order C-3");
      assert.equal(r.result.result.preview.subject, "Order C-3");
    },
  },
  {
    name: "environments.list",
    run: (novu) => novu.environments.list(),
    check: (r, novu, w) => {
      const byName = Object.fromEntries(r.result.map((environment) => [environment.name, environment]));
      assert.deepEqual(Object.keys(byName).sort(), ["Development", "Production"]);
      assert.equal(byName.Development.id, w.environmentId);
      assert.equal(byName.Production.parentId, w.environmentId);
    },
  },
  {
    name: "environments.create",
    run: (novu) => novu.environments.create({ name: "Staging", color: "#ff0000" }),
    check: async (r, novu) => {
      assert.equal(r.result.name, "Staging");
      assert.ok(r.result.apiKeys[0].key);
      const names = (await novu.environments.list()).result.map((environment) => environment.name);
      assert.equal(names.filter((name) => name === "Staging").length, 1);
    },
  },
  {
    name: "environments.update",
    run: async (novu) => {
      const created = (await novu.environments.create({ name: "Staging", color: "#ff0000" })).result;
      return novu.environments.update({ name: "QA" }, created.id);
    },
    check: async (r, novu) => {
      assert.equal(r.result.name, "QA");
      assert.ok((await novu.environments.list()).result.some((environment) => environment.id === r.result.id && environment.name === "QA"));
    },
  },
  {
    name: "environments.delete",
    run: async (novu, w) => {
      w.created = (await novu.environments.create({ name: "Staging", color: "#ff0000" })).result.id;
      return novu.environments.delete(w.created);
    },
    check: async (r, novu, w) => {
      assert.ok(!(await novu.environments.list()).result.some((environment) => environment.id === w.created));
    },
  },
  {
    name: "environments.getTags",
    run: async (novu, w) => {
      await createWorkflow(novu, "node-tagged", { tags: ["billing", "alerts"] });
      return novu.environments.getTags(w.environmentId);
    },
    check: (r) => assert.deepEqual(r.result.map((tag) => tag.name).sort(), ["alerts", "billing"]),
  },
  {
    name: "environments.diff",
    run: async (novu) => {
      const production = (await novu.environments.list()).result.find((environment) => environment.name === "Production");
      return novu.environments.diff({}, production.id);
    },
    check: (r, novu, w) => {
      assert.equal(r.result.sourceEnvironmentId, w.environmentId);
      assert.equal(r.result.summary.hasChanges, true);
      const added = r.result.resources.filter((resource) => resource.changes[0].action === "added");
      assert.ok(added.some((resource) => resource.sourceResource.id === w.workflow.id));
    },
  },
  {
    name: "environments.publish",
    run: async (novu, w) => {
      // Into an unprotected environment: Production takes changes from its own keys only.
      w.stagingId = (await novu.environments.create({ name: "Staging", color: "#ff0000" })).result.id;
      return novu.environments.publish({}, w.stagingId);
    },
    check: async (r, novu, w) => {
      const published = r.result.results.flatMap((result) => result.successful.map((item) => item.action));
      assert.ok(published.length >= 2 && published.every((action) => action === "created"));
      const after = (await novu.environments.diff({}, w.stagingId)).result;
      assert.equal(after.summary.hasChanges, false);
    },
  },
  {
    name: "environmentVariables.create",
    run: (novu, w) => novu.environmentVariables.create({ key: "BASE_URL", values: [{ environmentId: w.environmentId, value: "https://dev.example.com" }] }),
    check: async (r, novu, w) => {
      assert.deepEqual([r.result.key, r.result.isSecret], ["BASE_URL", false]);
      assert.deepEqual(values((await novu.environmentVariables.retrieve("BASE_URL")).result), { [w.environmentId]: "https://dev.example.com" });
    },
  },
  {
    name: "environmentVariables.list",
    run: async (novu, w) => {
      for (const key of ["BASE_URL", "API_TOKEN"]) await novu.environmentVariables.create({ key, values: [{ environmentId: w.environmentId, value: "v" }] });
      return novu.environmentVariables.list("BASE");
    },
    check: (r) => assert.deepEqual(r.result.map((variable) => variable.key), ["BASE_URL"]),
  },
  {
    name: "environmentVariables.retrieve",
    run: async (novu, w) => {
      await novu.environmentVariables.create({ key: "BASE_URL", values: [{ environmentId: w.environmentId, value: "v" }] });
      return novu.environmentVariables.retrieve("BASE_URL");
    },
    check: async (r, novu, w) => {
      assert.deepEqual([r.result.key, values(r.result)], ["BASE_URL", { [w.environmentId]: "v" }]);
      await assert.rejects(novu.environmentVariables.retrieve("MISSING"), (error) => error.statusCode === 404);
    },
  },
  {
    name: "environmentVariables.update",
    run: async (novu, w) => {
      await novu.environmentVariables.create({ key: "BASE_URL", values: [{ environmentId: w.environmentId, value: "v" }] });
      return novu.environmentVariables.update({ key: "API_URL", values: [{ environmentId: w.environmentId, value: "w" }] }, "BASE_URL");
    },
    check: async (r, novu, w) => {
      assert.equal(r.result.key, "API_URL");
      assert.deepEqual(values((await novu.environmentVariables.retrieve("API_URL")).result), { [w.environmentId]: "w" });
    },
  },
  {
    name: "environmentVariables.delete",
    run: async (novu, w) => {
      await novu.environmentVariables.create({ key: "BASE_URL", values: [{ environmentId: w.environmentId, value: "v" }] });
      return novu.environmentVariables.delete("BASE_URL");
    },
    check: async (r, novu) => {
      await assert.rejects(novu.environmentVariables.retrieve("BASE_URL"), (error) => error.statusCode === 404);
    },
  },
  {
    name: "environmentVariables.usage",
    run: async (novu, w) => {
      await novu.environmentVariables.create({ key: "BASE_URL", values: [{ environmentId: w.environmentId, value: "v" }] });
      await createWorkflow(novu, "node-reads-env", { steps: [{ ...inAppStep, controlValues: { body: "Open {{ env.BASE_URL }}/orders" } }] });
      return novu.environmentVariables.usage("BASE_URL");
    },
    check: (r) => assert.deepEqual(r.result.workflows.map((workflow) => workflow.workflowId), ["node-reads-env"]),
  },
  {
    name: "layouts.create",
    run: (novu) => novu.layouts.create({ layoutId: "node-brand", name: "Brand" }),
    check: async (r, novu) => {
      assert.deepEqual([r.result.layoutId, r.result.name], ["node-brand", "Brand"]);
      assert.equal((await novu.layouts.retrieve(r.result.id)).result.layoutId, "node-brand");
    },
  },
  {
    name: "layouts.list",
    run: async (novu) => {
      for (const [layoutId, name] of [["alpha", "Alpha news"], ["beta", "Beta"]]) await novu.layouts.create({ layoutId, name });
      return novu.layouts.list({ query: "news" });
    },
    check: (r) => {
      assert.deepEqual(r.result.layouts.map((layout) => layout.layoutId), ["alpha"]);
      assert.equal(r.result.totalCount, 1);
    },
  },
  {
    name: "layouts.retrieve",
    run: async (novu) => {
      await novu.layouts.create({ layoutId: "node-brand", name: "Brand" });
      return novu.layouts.retrieve("node-brand");
    },
    check: async (r, novu) => {
      assert.equal(r.result.name, "Brand");
      await assert.rejects(novu.layouts.retrieve("missing"), (error) => error.statusCode === 404);
    },
  },
  {
    name: "layouts.update",
    run: (novu) => createLayout(novu, "node-brand").then((result) => ({ result })),
    check: async (r, novu) => {
      assert.equal(r.result.controls.values.email.body, layoutBody);
      assert.equal((await novu.layouts.retrieve("node-brand")).result.controls.values.email.body, layoutBody);
    },
  },
  {
    name: "layouts.delete",
    run: async (novu) => {
      await novu.layouts.create({ layoutId: "node-brand", name: "Brand" });
      return novu.layouts.delete("node-brand");
    },
    check: async (r, novu) => {
      await assert.rejects(novu.layouts.retrieve("node-brand"), (error) => error.statusCode === 404);
    },
  },
  {
    name: "layouts.duplicate",
    run: async (novu) => {
      await createLayout(novu, "node-brand");
      return novu.layouts.duplicate({ name: "Brand copy", layoutId: "node-brand-2" }, "node-brand");
    },
    check: async (r, novu) => {
      assert.deepEqual([r.result.layoutId, r.result.isDefault], ["node-brand-2", false]);
      assert.equal((await novu.layouts.retrieve("node-brand-2")).result.controls.values.email.body, layoutBody);
    },
  },
  {
    name: "layouts.generatePreview",
    run: async (novu) => {
      await createLayout(novu, "node-brand");
      return novu.layouts.generatePreview({ previewPayload: { subscriber: { firstName: "Grace" } } }, "node-brand");
    },
    check: (r) => assert.ok(r.result.result.preview.body.startsWith("<html><body><h1>Grace</h1>")),
  },
  {
    name: "layouts.usage",
    run: async (novu) => {
      await createLayout(novu, "node-brand");
      await createWorkflow(novu, "node-receipts", { steps: [{ ...emailStep, controlValues: { ...emailStep.controlValues, layoutId: "node-brand" } }] });
      return novu.layouts.usage("node-brand");
    },
    check: (r) => assert.deepEqual(r.result.workflows.map((workflow) => workflow.workflowId), ["node-receipts"]),
  },
  {
    name: "translations.create",
    run: (novu, w) => translate(novu, w.workflow.identifier, "fr_FR", french),
    check: async (r, novu, w) => {
      assert.deepEqual([r.resourceId, r.resourceType, r.locale, r.content], [w.workflow.identifier, "workflow", "fr_FR", french]);
      assert.deepEqual((await translationOf(novu, w.workflow.identifier, "fr_FR")).content, french);
    },
  },
  {
    name: "translations.retrieve",
    run: async (novu, w) => {
      await translate(novu, w.workflow.identifier, "en_US", { welcome: { title: "Welcome" } });
      await translate(novu, w.workflow.identifier, "fr_FR", french);
      return translationOf(novu, w.workflow.identifier, "en_US");
    },
    check: async (r, novu, w) => {
      assert.deepEqual([r.locale, r.content], ["en_US", { welcome: { title: "Welcome" } }]);
      await assert.rejects(translationOf(novu, w.workflow.identifier, "de_DE"), (error) => error.statusCode === 404);
    },
  },
  {
    name: "translations.delete",
    run: async (novu, w) => {
      await translate(novu, w.workflow.identifier, "fr_FR", french);
      return novu.translations.delete({ resourceType: "workflow", resourceId: w.workflow.identifier, locale: "fr_FR" });
    },
    check: async (r, novu, w) => {
      await assert.rejects(translationOf(novu, w.workflow.identifier, "fr_FR"), (error) => error.statusCode === 404);
    },
  },
  {
    name: "translations.upload",
    run: (novu, w) =>
      novu.translations.upload({ resourceId: w.workflow.identifier, resourceType: "workflow", files: [jsonFile("en_US.json", { title: "Hello" })] }),
    check: async (r, novu, w) => {
      assert.deepEqual([r.totalFiles, r.successfulUploads, r.failedUploads], [1, 1, 0]);
      assert.deepEqual((await translationOf(novu, w.workflow.identifier, "en_US")).content, { title: "Hello" });
    },
  },
  {
    name: "translations.groups.retrieve",
    run: async (novu, w) => {
      await translate(novu, w.workflow.identifier, "fr_FR", french);
      await translate(novu, w.workflow.identifier, "en_US", { welcome: { title: "Welcome" } });
      return novu.translations.groups.retrieve("workflow", w.workflow.identifier);
    },
    check: (r, novu, w) => {
      assert.equal(r.resourceId, w.workflow.identifier);
      assert.deepEqual([...r.locales].sort(), ["en_US", "fr_FR"]);
    },
  },
  {
    name: "translations.groups.delete",
    run: async (novu, w) => {
      await translate(novu, w.workflow.identifier, "fr_FR", french);
      await translate(novu, w.workflow.identifier, "en_US", { k: "v" });
      return novu.translations.groups.delete("workflow", w.workflow.identifier);
    },
    check: async (r, novu, w) => {
      for (const locale of ["fr_FR", "en_US"]) {
        await assert.rejects(translationOf(novu, w.workflow.identifier, locale), (error) => error.statusCode === 404);
      }
      await assert.rejects(novu.translations.groups.retrieve("workflow", w.workflow.identifier), (error) => error.statusCode === 404);
    },
  },
  {
    name: "translations.master.retrieve",
    run: async (novu) => {
      await createWorkflow(novu, "node-translated", { isTranslationEnabled: true });
      await translate(novu, "node-translated", "fr_FR", french);
      return novu.translations.master.retrieve("fr_FR");
    },
    check: async (r, novu) => {
      assert.deepEqual(r.workflows, { "node-translated": french });
      assert.deepEqual((await novu.translations.master.retrieve("de_DE")).workflows, {});
    },
  },
  {
    name: "translations.master.import",
    run: (novu, w) =>
      novu.translations.master.import({ locale: "en_US", masterJson: { workflows: { [w.workflow.identifier]: { title: "Hello" }, "no-such-workflow": { k: "v" } } } }),
    check: async (r, novu, w) => {
      assert.deepEqual([r.success, r.successful, r.failed], [true, [w.workflow.identifier], ["no-such-workflow"]]);
      assert.deepEqual((await translationOf(novu, w.workflow.identifier, "en_US")).content, { title: "Hello" });
    },
  },
  {
    name: "translations.master.upload",
    run: (novu, w) => novu.translations.master.upload({ file: jsonFile("de_DE.json", { workflows: { [w.workflow.identifier]: { title: "Hallo" } } }) }),
    check: async (r, novu, w) => {
      assert.deepEqual([r.success, r.successful], [true, [w.workflow.identifier]]);
      assert.deepEqual((await translationOf(novu, w.workflow.identifier, "de_DE")).content, { title: "Hallo" });
    },
  },
];
