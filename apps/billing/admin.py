"""The bill in the admin: upload a FOCUS file (imported or refused whole); the imports and lines, read-only."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse

from apps.billing.focusfile import BillFileError
from apps.billing.models import BillImport, BillLine
from apps.billing.services import import_bill


class BillUploadForm(forms.Form):
    file = forms.FileField(help_text="FOCUS 1.0-1.3 cost and usage file: CSV, gzipped CSV or Parquet.")


class ReadOnly(admin.ModelAdmin):
    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(BillImport)
class BillImportAdmin(ReadOnly):
    """"Add" is the upload: the file is imported by the same service as `manage.py import_bill`."""

    list_display = ["name", "focus_version", "rows_read", "lines_kept", "lines_matched", "lines_replaced",
                    "imported_by", "imported_at"]
    readonly_fields = ["name", "sha256", "focus_version", "rows_read", "lines_kept", "lines_matched", "lines_replaced",
                       "currency", "warnings", "imported_by", "imported_at"]

    def add_view(self, request, form_url="", extra_context=None):
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = BillUploadForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            try:
                result = import_bill(upload.read(), upload.name, user=request.user)
            except BillFileError as exc:
                form.add_error("file", f"Refused, nothing imported: {exc}")
            else:
                bill = result.bill
                if result.created:
                    messages.success(request, f"{bill.name}: {bill.lines_kept} GPU node lines kept, "
                                              f"{bill.lines_matched} matched to nodes.")
                else:
                    messages.info(request, f"This file was imported before ({bill.name}): nothing changed.")
                return redirect(reverse("admin:billing_billimport_change", args=[bill.pk]))
        context = {**self.admin_site.each_context(request), "form": form, "opts": self.model._meta,
                   "title": "Import a FOCUS bill", "has_view_permission": True}
        return TemplateResponse(request, "admin/billing/upload.html", context)


@admin.register(BillLine)
class BillLineAdmin(ReadOnly):
    list_display = ["row", "bill", "provider", "resource_id", "charge_period_start", "effective_cost", "billed_cost",
                    "match", "cluster", "note"]
    list_filter = ["match", "provider", "cluster", "charge_category"]
    search_fields = ["resource_id", "resource_name"]
    list_select_related = ["bill", "cluster"]

    def has_add_permission(self, request) -> bool:
        return False
