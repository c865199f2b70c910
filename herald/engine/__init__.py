"""The delivery engine: step filters, template rendering and delay/digest schedules."""
