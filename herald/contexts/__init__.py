"""Novu's contexts (``/v2/contexts``) and their use by triggers and topic subscriptions."""
