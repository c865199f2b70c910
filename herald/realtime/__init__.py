"""The Inbox's real-time socket: @novu/js's socket.io client, fed by every process's inbox changes."""
