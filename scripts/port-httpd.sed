# Converts coved code written against libevent's evhttp to coved's own HTTP
# server (src/daemon/httpd.h). Run on a branch made before the switch:
#   sed -i -f scripts/port-httpd.sed $(ls src/daemon/*.[ch] | grep -v /httpd)
# Header lists and query strings keep libevent_extra's helpers
# (struct evkeyvalq, evhttp_find_header, evhttp_add_header,
# evhttp_parse_query_str, evhttp_clear_headers): they are not renamed.
s/evhttp_uri_get_path(evhttp_request_get_evhttp_uri(\([^()]*\)))/http_req_path(\1)/g
s/evhttp_uri_get_query(evhttp_request_get_evhttp_uri(\([^()]*\)))/http_req_query(\1)/g
s/struct evhttp_request\b/struct http_req/g
s/struct evhttp_connection\b/struct http_conn/g
s/struct evhttp_bound_socket\b/struct http_listener/g
s/\bevhttp_request_get_connection\b/http_req_conn/g
s/\bevhttp_connection_get_bufferevent\b/http_conn_bev/g
s/\bevhttp_request_get_input_buffer\b/http_req_body/g
s/\bevhttp_request_get_input_headers\b/http_req_in_headers/g
s/\bevhttp_request_get_output_headers\b/http_req_out_headers/g
s/\bevhttp_request_get_command\b/http_req_method/g
s/\bevhttp_send_reply_start\b/http_reply_start/g
s/\bevhttp_send_reply_chunk_with_cb\b/http_reply_chunk_with_cb/g
s/\bevhttp_send_reply_chunk\b/http_reply_chunk/g
s/\bevhttp_send_reply_end\b/http_reply_end/g
s/\bevhttp_send_reply\b/http_send_reply/g
s/\bevhttp_connection_set_closecb\b/http_conn_set_closecb/g
s/\bevhttp_connection_free\b/http_conn_close/g
s/enum evhttp_cmd_type\b/enum http_method/g
s/\bEVHTTP_REQ_\([A-Z]*\)/HTTP_\1/g
s/#include <event2\/http\.h>/#include "daemon\/httpd.h"/
