"""Staff read the product's tables in the admin: an authentication backend that grants active staff the `view_`
permission of every product model (clusters, teams, prices, the ledger, findings, reports...), so a staff user who
is not a superuser sees the admin's read-only pages instead of "You don't have permission to view or edit
anything". Changing anything still takes the model's own permission (ModelBackend, the superuser flag).

People, groups and API tokens (`auth`, `accounts`) are not in the grant: who may do what stays with superusers.
"""

from __future__ import annotations

from django.contrib.auth.backends import BaseBackend

# The product's apps whose tables staff may read (app labels).
READABLE_APPS = frozenset({"inventory", "usage", "capacity", "queues", "findings", "reports", "monitoring"})


def staff_may_view(user_obj, perm: str) -> bool:
    """`<app>.view_<model>` of a product app, for an active staff user."""
    app, _, codename = perm.partition(".")
    return bool(getattr(user_obj, "is_active", False) and getattr(user_obj, "is_staff", False)
                and app in READABLE_APPS and codename.startswith("view_"))


class StaffReadBackend(BaseBackend):
    """Authenticates nobody; answers `has_perm` (and `has_module_perms`) for staff reads."""

    def has_perm(self, user_obj, perm: str, obj=None) -> bool:
        return staff_may_view(user_obj, perm)

    def has_module_perms(self, user_obj, app_label: str) -> bool:
        return bool(getattr(user_obj, "is_active", False) and getattr(user_obj, "is_staff", False)
                    and app_label in READABLE_APPS)
