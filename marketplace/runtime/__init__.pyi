"""Type stub of :mod:`marketplace.runtime`: its surface for the packages above it, written once (read by
``lazy_loader.attach_stub`` at run time and by type checkers)."""

from .assemble import assemble_from_party_reports as assemble_from_party_reports
from .assemble import assemble_from_reports as assemble_from_reports
from .command_line import party_command as party_command
from .forkserver import forkserver_running as forkserver_running
from .identity import scenario_identity as scenario_identity
from .json_files import json_default as json_default
from .json_files import json_indented as json_indented
from .json_files import json_text as json_text
from .json_files import write_json as write_json
from .json_files import write_text_whole as write_text_whole
from .links import link_settings as link_settings
from .party_process import host_nodes as host_nodes
from .party_process import run_host as run_host
from .party_reports import party_report as party_report
from .publication import OWN as OWN
from .publication import consumer_handover as consumer_handover
from .publication import internal_failure as internal_failure
from .report import write_messages_csv as write_messages_csv
from .results import Report as Report
from .run_folder import RunFolderError as RunFolderError
from .run_folder import check_run_folder as check_run_folder
from .run_folder import default_run_folder as default_run_folder
from .world import prepare_world as prepare_world
