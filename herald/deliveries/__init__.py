"""What delivery providers report about sent messages, and each notification's execution details."""
