from django.urls import path

from apps.savings.api import views

urlpatterns = [
    path("savings/", views.SavingListApi.as_view(), name="savings"),
]
